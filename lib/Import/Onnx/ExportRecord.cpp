//===- ExportRecord.cpp - the zcc.* metadata of an exported ONNX model ----===//
//
// See zcc/Import/ExportRecord.h. Depends on LLVM's Support library only.
//
//===----------------------------------------------------------------------===//
#include "zcc/Import/ExportRecord.h"

#include "support/JsonDepth.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <cmath>

using namespace zcc;
using llvm::StringRef;

namespace {

/// A JSON list of strings, or nullopt.
std::optional<std::vector<std::string>> stringList(const llvm::json::Value &v) {
  const llvm::json::Array *list = v.getAsArray();
  if (!list)
    return std::nullopt;
  std::vector<std::string> out;
  for (const llvm::json::Value &item : *list) {
    auto str = item.getAsString();
    if (!str)
      return std::nullopt;
    out.push_back(str->str());
  }
  return out;
}

std::string quoted(StringRef name) { return "'" + zrt::clipForMessage(name) + "'"; }

} // namespace

llvm::Expected<ExportRecord>
zcc::parseExportRecord(llvm::ArrayRef<std::pair<StringRef, StringRef>> metadata,
                       const llvm::StringSet<> &floats) {
  ExportRecord record;
  for (const auto &[key, value] : metadata) {
    if (!key.starts_with("zcc."))
      continue;
    auto bad = [&, key = key](const std::string &what) {
      return llvm::createStringError("metadata " + quoted(key) + " " + what +
                                     " (the export record tools/zcc-export writes; re-export "
                                     "the model)");
    };
    // llvm::json parses, prints and frees recursively: a record nested
    // 100,000 deep would overflow the stack.
    if (std::string deep = zrt::jsonDepthError(value); !deep.empty())
      return bad("is not JSON zcc writes: " + deep);
    llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(value);
    if (!parsed)
      return bad("is not JSON: " + zrt::clipForMessage(llvm::toString(parsed.takeError())));
    auto notFloat = [&](StringRef name) {
      return "names " + quoted(name) + ", which is not a float initializer of the model";
    };
    if (key == "zcc.parameters") {
      auto names = stringList(*parsed);
      if (!names)
        return bad("is not a JSON list of initializer names");
      for (const std::string &name : *names)
        if (!floats.contains(name))
          return bad(notFloat(name));
      record.parameters = std::move(names);
    } else if (key == "zcc.names") {
      const llvm::json::Object *map = parsed->getAsObject();
      if (!map)
        return bad("is not a JSON object of initializer -> parameter name");
      auto &names = record.names.emplace();
      llvm::StringMap<std::string> byOriginal;
      for (const auto &[initializer, original] : *map) {
        auto str = original.getAsString();
        if (!str)
          return bad("maps " + quoted(initializer) + " to something not a string");
        if (!floats.contains(initializer))
          return bad(notFloat(initializer));
        auto [it, fresh] = byOriginal.try_emplace(*str, initializer.str());
        if (!fresh)
          return bad("maps both " + quoted(it->second) + " and " + quoted(initializer) + " to " +
                     quoted(*str));
        names.emplace_back(initializer.str(), str->str());
      }
    } else if (key == "zcc.tied") {
      const llvm::json::Array *groups = parsed->getAsArray();
      if (!groups)
        return bad("is not a JSON list of lists of two or more parameter names");
      auto &tied = record.tied.emplace();
      for (const llvm::json::Value &g : *groups) {
        auto group = stringList(g);
        if (!group || group->size() < 2)
          return bad("is not a JSON list of lists of two or more parameter names");
        tied.push_back(std::move(*group));
      }
    } else if (key == "zcc.padding_idx") {
      // nn.Embedding(padding_idx=P) of the module: {initializer: P}.
      const llvm::json::Object *map = parsed->getAsObject();
      if (!map)
        return bad("is not a JSON object of initializer -> padding index");
      for (const auto &[initializer, index] : *map) {
        auto row = index.getAsInteger();
        if (!row || !floats.contains(initializer))
          return bad("maps " + quoted(initializer) +
                     ", which must be a float initializer of the model, to something not an "
                     "integer row");
        record.paddingIdx.emplace_back(initializer.str(), *row);
      }
    } else if (key == "zcc.aux_loss") {
      // A mixture of experts' auxiliary loss: {output: coefficient}.
      const llvm::json::Object *map = parsed->getAsObject();
      if (!map)
        return bad("is not a JSON object of output -> coefficient");
      auto &aux = record.auxLoss.emplace();
      for (const auto &[output, coef] : *map) {
        auto c = coef.getAsNumber();
        if (!c || !std::isfinite(*c))
          return bad("maps " + quoted(output) + " to something not a finite number");
        aux.emplace_back(output.str(), *c);
      }
    } else if (key == "zcc.config") {
      if (!parsed->getAsObject())
        return bad("is not a JSON object (a config.json)");
      record.config = value.str();
    }
  }
  return record;
}
