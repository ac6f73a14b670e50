âğÏ¤ÇÕñ«.gpt2-tiny.onnx 08@€áuhÿÿÿÿÿÿÿÿÿr&
m.transformer.wpe.weight@@@(€®8r-
m.transformer.h.0.ln_1.weight@@ € (€®8r+
m.transformer.h.0.ln_1.bias@@ À (€®8r6
$m.transformer.h.0.attn.c_attn.weight@À@ €!(€®8r4
"m.transformer.h.0.attn.c_attn.biasÀ@ €(€®8r6
$m.transformer.h.0.attn.c_proj.weight@@@ À‚(€®8r3
"m.transformer.h.0.attn.c_proj.bias@@ À¢(€®8r.
m.transformer.h.0.ln_2.weight@@ €£(€®8r,
m.transformer.h.0.ln_2.bias@@ À£(€®8r4
!m.transformer.h.0.mlp.c_fc.weight@€@ €¤(€®8r1
m.transformer.h.0.mlp.c_fc.bias€@ €¤(€®8r6
#m.transformer.h.0.mlp.c_proj.weight€@@ €¦(€®8r2
!m.transformer.h.0.mlp.c_proj.bias@@ €¦(€®8r.
m.transformer.h.1.ln_1.weight@@ À¦(€®8r,
m.transformer.h.1.ln_1.bias@@ €§(€®8r7
$m.transformer.h.1.attn.c_attn.weight@À@ À§(€®8r4
"m.transformer.h.1.attn.c_attn.biasÀ@ À‡(€®8r6
$m.transformer.h.1.attn.c_proj.weight@@@ €‰(€®8r3
"m.transformer.h.1.attn.c_proj.bias@@ €©(€®8r.
m.transformer.h.1.ln_2.weight@@ À©(€®8r,
m.transformer.h.1.ln_2.bias@@ €ª(€®8r4
!m.transformer.h.1.mlp.c_fc.weight@€@ Àª(€®8r1
m.transformer.h.1.mlp.c_fc.bias€@ Àª(€®8r6
#m.transformer.h.1.mlp.c_proj.weight€@@ À¬(€®8r2
!m.transformer.h.1.mlp.c_proj.bias@@ À¬(€®8r*
m.transformer.ln_f.weight@@ €­(€®8r(
m.transformer.ln_f.bias@@ À­(€®8r#
m.lm_head.weight€@@ €®(€®8r
m.transformer.lifted_tensor_0z
¿©¢å¯í¯æŒ€ÕıÁÃ“‘‘—