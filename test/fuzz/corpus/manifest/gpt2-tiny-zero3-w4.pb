çºÛã·ß”Ãågpt2-tiny.onnx (08@€ãhÿÿÿÿÿÿÿÿÿr(
m.transformer.wpe.weight@@@(€ 08r8
$m.transformer.h.0.attn.c_attn.weight@À@ € (€ 08r8
$m.transformer.h.0.attn.c_proj.weight@@@ €€(€ 08r6
!m.transformer.h.0.mlp.c_fc.weight@€@ € (€ 08r8
#m.transformer.h.0.mlp.c_proj.weight€@@ € (€ 08r9
$m.transformer.h.1.attn.c_attn.weight@À@ € (€ 08r8
$m.transformer.h.1.attn.c_proj.weight@@@ €€(€ 08r6
!m.transformer.h.1.mlp.c_fc.weight@€@ € (€ 08r8
#m.transformer.h.1.mlp.c_proj.weight€@@ € (€ 08r%
m.lm_head.weight€@@ € (€ 08r+
m.transformer.h.0.ln_1.weight@ÀÀ(€8r+
m.transformer.h.0.ln_1.bias@ÀÀ @(€8r4
"m.transformer.h.0.attn.c_attn.biasÀÀÀ €(€8r3
"m.transformer.h.0.attn.c_proj.bias@ÀÀ À(€8r.
m.transformer.h.0.ln_2.weight@ÀÀ €(€8r,
m.transformer.h.0.ln_2.bias@ÀÀ À(€8r1
m.transformer.h.0.mlp.c_fc.bias€ÀÀ €(€8r2
!m.transformer.h.0.mlp.c_proj.bias@ÀÀ €(€8r.
m.transformer.h.1.ln_1.weight@ÀÀ À(€8r,
m.transformer.h.1.ln_1.bias@ÀÀ €(€8r4
"m.transformer.h.1.attn.c_attn.biasÀÀÀ À(€8r3
"m.transformer.h.1.attn.c_proj.bias@ÀÀ €	(€8r.
m.transformer.h.1.ln_2.weight@ÀÀ À	(€8r,
m.transformer.h.1.ln_2.bias@ÀÀ €
(€8r1
m.transformer.h.1.mlp.c_fc.bias€ÀÀ À
(€8r2
!m.transformer.h.1.mlp.c_proj.bias@ÀÀ À(€8r*
m.transformer.ln_f.weight@ÀÀ €(€8r(
m.transformer.ln_f.bias@ÀÀ À(€8r
m.transformer.lifted_tensor_0z'ß¨…Ç™µáŞ#˜«ŞË¶õ¦’ššáøıÔ’÷ŒêõÈëØö†€ùè£Ÿá÷‡×õ