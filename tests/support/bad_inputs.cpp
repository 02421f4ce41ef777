// The bad-input catalogue (see bad_inputs.h), model-file half: checkpoints, configs and
// tokenizers, the shared building blocks (bad_input_builder.h), and the catalogue's assembly.
// Every entry starts from a copy of a real fixture in tests/data and breaks exactly one thing, so
// the error a user sees is the one for that thing.
#include "tests/support/bad_inputs.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "engine/models/model_io.h"
#include "tests/support/bad_input_builder.h"

namespace hh::test::bad_inputs {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kFixtures = HH_FIXTURES_DIR;

// A safetensors file as its JSON header and data buffer, and back.
struct Safetensors {
  json header;
  std::string data;
};
Safetensors readSafetensors(const std::string& path) {
  const std::string bytes = readBytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  return {json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}
std::string lengthPrefix(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}
void writeSafetensors(const std::string& path, const std::string& header, const std::string& data) {
  writeBytes(path, lengthPrefix(header.size()) + header + data);
}
// The first tensor whose name contains `part`.
std::string tensorNamed(const json& header, const std::string& part) {
  for (const auto& [name, value] : header.items())
    if (name.find(part) != std::string::npos) return name;
  throw std::runtime_error("bad inputs: the fixture has no tensor like " + part);
}

}  // namespace

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("bad inputs: cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) throw std::runtime_error("bad inputs: cannot write " + path);
}

// A copy of a fixture model folder (without the parity reference, which no case needs).
std::string copyFixture(const std::string& fixture, const std::string& to) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(kFixtures + "/" + fixture)) {
    if (entry.path().filename() == "reference.safetensors") continue;
    fs::copy_file(entry.path(), fs::path(to) / entry.path().filename());
  }
  return to;
}

std::string deepJson(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

BadInput& Builder::add(const std::string& id, const std::string& category, const std::string& description,
                       const std::string& file, std::vector<std::string> cli, GuiOpen gui, const std::string& guiPath) {
  BadInput b;
  b.id = id;
  b.category = category;
  b.description = description;
  b.file = file;
  b.cli = std::move(cli);
  b.gui = gui;
  b.guiPath = guiPath;
  out.push_back(std::move(b));
  return out.back();
}

std::string Builder::classifier(const std::string& id) {
  const std::string fixture = kFixtures + "/tiny-random-gpt2", dir = root + "/" + id;
  models::saveModel(*models::loadModelForClassification(fixture, 2), dir, fixture);
  return dir;
}

std::string Builder::model(const std::string& id, const std::string& fixture) {
  return copyFixture(fixture, root + "/" + id);
}

BadInput& Builder::folderCase(const std::string& id, const std::string& category, const std::string& description,
                              const std::string& folder, const std::string& file) {
  return add(id, category, description, file, {"inspect", folder}, GuiOpen::ModelFolder, folder);
}

void checkpointCases(Builder& b) {
  const std::string fixture = kFixtures + "/tiny-random-gpt2/model.safetensors";
  const auto original = readSafetensors(fixture);
  const std::string originalBytes = readBytes(fixture);
  // A tiny GPT-2 copy whose model.safetensors `breakIt` rewrites.
  auto weights = [&](const std::string& id, const std::string& description,
                     const std::function<void(const std::string&)>& breakIt) -> BadInput& {
    const auto folder = b.model(id), file = folder + "/model.safetensors";
    breakIt(file);
    return b.folderCase(id, "checkpoint", description, folder, file);
  };
  // The header edited by `edit`, the data as it was.
  auto edited = [&](const std::function<void(json&)>& edit) {
    return [&original, edit](const std::string& file) {
      auto header = original.header;
      edit(header);
      writeSafetensors(file, header.dump(), original.data);
    };
  };

  weights("checkpoint.truncated", "model.safetensors cut to half its size (an interrupted download)",
          [&](const std::string& f) { writeBytes(f, originalBytes.substr(0, originalBytes.size() / 2)); });
  weights("checkpoint.header_past_end", "header length field larger than the file",
          [&](const std::string& f) { writeBytes(f, lengthPrefix(originalBytes.size()) + originalBytes.substr(8)); });
  weights("checkpoint.huge_header", "header length field claims 1 TB (over the 100 MB limit)",
          [&](const std::string& f) { writeBytes(f, lengthPrefix(uint64_t(1) << 40) + originalBytes.substr(8)); });
  // The tensor stored last, moved 1 MB past the end of the data buffer.
  weights("checkpoint.offsets_past_end", "a tensor's data_offsets point 1 MB past the end of the file",
          edited([](json& h) {
            std::string last;
            for (const auto& [name, value] : h.items())
              if (name != "__metadata__" && (last.empty() || value["data_offsets"][0] > h[last]["data_offsets"][0]))
                last = name;
            auto& offsets = h[last]["data_offsets"];
            offsets = {offsets[0].get<uint64_t>() + (1u << 20), offsets[1].get<uint64_t>() + (1u << 20)};
          }));
  // Two tensors of the same size: the one stored later is pointed at the earlier one's bytes.
  weights("checkpoint.overlapping_tensors", "two tensors share the same bytes (overlapping data_offsets)",
          edited([](json& h) {
            const auto a = tensorNamed(h, "h.0.ln_1.weight"), c = tensorNamed(h, "h.0.ln_1.bias");
            const bool aFirst = h[a]["data_offsets"][0] < h[c]["data_offsets"][0];
            h[aFirst ? c : a]["data_offsets"] = h[aFirst ? a : c]["data_offsets"];
          }));
  weights("checkpoint.int_weight", "a weight stored as I32 instead of a float type",
          edited([](json& h) { h[tensorNamed(h, "h.0.attn.c_proj.weight")]["dtype"] = "I32"; }));
  weights("checkpoint.unknown_dtype", "a tensor with the unknown dtype \"F8\"",
          edited([](json& h) { h[tensorNamed(h, "ln_f.weight")]["dtype"] = "F8"; }));
  weights("checkpoint.nan_weights", "one weight tensor is all NaN (refused at load, naming the tensor)",
          [&](const std::string& f) {
            std::string data = original.data;
            const auto& offsets =
                original.header[tensorNamed(original.header, "h.1.attn.c_attn.weight")]["data_offsets"];
            const float nan = std::numeric_limits<float>::quiet_NaN();
            for (uint64_t at = offsets[0].get<uint64_t>(); at < offsets[1].get<uint64_t>(); at += 4)
              std::memcpy(&data[at], &nan, 4);
            writeSafetensors(f, original.header.dump(), data);
          });
  weights("checkpoint.header_not_json", "the header is plain text, not JSON", [&](const std::string& f) {
    writeSafetensors(f, "this is not JSON " + std::string(64, '~'), original.data);
  });
  weights("checkpoint.deep_json", "the header is 100000 nested JSON arrays",
          [&](const std::string& f) { writeSafetensors(f, deepJson(100000), original.data); });
  auto& pickle = weights(
      "checkpoint.pickle_only", "only a PyTorch pickle (pytorch_model.bin), no safetensors", [](const std::string& f) {
        fs::remove(f);
        writeBytes(fs::path(f).parent_path() / "pytorch_model.bin", std::string("\x80\x02}q\x00.", 6));
      });
  pickle.file = pickle.guiPath + "/pytorch_model.bin";  // a pickle's first bytes: never parsed
  weights("checkpoint.missing_shard", "model.safetensors.index.json names a shard that is not there",
          [&](const std::string& f) {
            fs::remove(f);
            json index{{"metadata", {{"total_size", original.data.size()}}}, {"weight_map", json::object()}};
            for (const auto& [name, value] : original.header.items())
              if (name != "__metadata__") index["weight_map"][name] = "model-00001-of-00002.safetensors";
            writeBytes(f + ".index.json", index.dump(2));
          })
      .file += ".index.json";
  weights("checkpoint.shard_name_too_long", "model.safetensors.index.json names a shard longer than a file name may be",
          [&](const std::string& f) {
            fs::remove(f);
            json index{{"weight_map", json::object()}};
            for (const auto& [name, value] : original.header.items())
              if (name != "__metadata__") index["weight_map"][name] = std::string(300, 's') + ".safetensors";
            writeBytes(f + ".index.json", index.dump(2));
          })
      .file += ".index.json";
  weights("checkpoint.is_directory", "model.safetensors is a directory", [](const std::string& f) {
    fs::remove(f);
    fs::create_directory(f);
  });
  weights("checkpoint.unreadable", "model.safetensors has no read permission", [](const std::string& f) {
    fs::permissions(f, fs::perms::none);
  }).needsUnprivileged = true;
  weights("checkpoint.empty", "model.safetensors is 0 bytes", [](const std::string& f) { writeBytes(f, ""); });
}

void configCases(Builder& b) {
  const json config = json::parse(readBytes(kFixtures + "/tiny-random-gpt2/config.json"));
  auto broken = [&](const std::string& id, const std::string& description, const std::string& bytes) {
    const auto folder = b.model(id);
    writeBytes(folder + "/config.json", bytes);
    b.folderCase(id, "config", description, folder, folder + "/config.json");
  };
  auto edited = [&](const std::string& id, const std::string& description, const char* key, const json& value) {
    json j = config;
    if (value.is_discarded())
      j.erase(key);
    else
      j[key] = value;
    broken(id, description, j.dump(2));
  };
  broken("config.not_json", "config.json cut off in the middle (not JSON)", config.dump(2).substr(0, 200));
  broken("config.deep_json", "config.json is 100000 nested JSON arrays", deepJson(100000));
  edited("config.missing_key", "config.json lacks the required \"n_head\"", "n_head", json(json::value_t::discarded));
  edited("config.zero_heads", "\"n_head\": 0", "n_head", 0);
  edited("config.indivisible_heads", "\"n_embd\": 30 is not divisible by \"n_head\": 4", "n_embd", 30);
  edited("config.negative_vocab", "\"vocab_size\": -5", "vocab_size", -5);
  edited("config.absurd_size", "\"n_embd\": 10^9 (must be refused before allocating)", "n_embd", 1000000000);
  std::string overflow = config.dump(2);  // JSON has no such number: the text is edited
  const auto embd = overflow.find("\"n_embd\": ");
  overflow.replace(embd, overflow.find(',', embd) - embd, "\"n_embd\": 1e400");
  broken("config.number_overflow", "\"n_embd\": 1e400, past the range of a double", overflow);
  std::string text = config.dump(2);
  text.replace(text.find("tiny-random-gpt2"), 4, "ti\xff\xfe");
  broken("config.non_utf8", "config.json holds bytes that are not UTF-8", text);
  const auto folder = b.model("config.is_directory");
  fs::remove(folder + "/config.json");
  fs::create_directory(folder + "/config.json");
  b.folderCase("config.is_directory", "config", "config.json is a directory", folder, folder + "/config.json");
}

void tokenizerCases(Builder& b) {
  auto tokenizerJson = [&](const std::string& id, const std::string& description, const std::string& bytes) {
    const auto folder = b.model(id);
    writeBytes(folder + "/tokenizer.json", bytes);
    b.folderCase(id, "tokenizer", description, folder, folder + "/tokenizer.json");
  };
  tokenizerJson("tokenizer.not_json", "tokenizer.json cut off in the middle (not JSON)",
                readBytes(kFixtures + "/tiny-random-gpt2/tokenizer.json").substr(0, 300));
  tokenizerJson("tokenizer.deep_json", "tokenizer.json is 100000 nested JSON arrays", deepJson(100000));
  json bert = json::parse(readBytes(kFixtures + "/bert-tiniest/tokenizer.json"));
  bert["post_processor"]["special_tokens"]["[CLS]"]["ids"] = {999999};
  const auto bertFolder = b.model("tokenizer.special_id_past_vocab", "bert-tiniest");
  writeBytes(bertFolder + "/tokenizer.json", bert.dump());
  b.folderCase("tokenizer.special_id_past_vocab", "tokenizer",
               "tokenizer.json's post-processor gives [CLS] the id 999999 (the vocabulary has 30522)", bertFolder,
               bertFolder + "/tokenizer.json");
  // GPT-2's whole tokenizer (50257 tokens) beside the tiny model's 1000-row embedding.
  const auto other = b.model("tokenizer.from_another_model");
  fs::remove(other + "/tokenizer.json");
  for (const char* name : {"vocab.json", "merges.txt"})
    fs::copy_file(kFixtures + "/gpt2-tokenizer/" + name, other + "/" + name, fs::copy_options::overwrite_existing);
  b.folderCase("tokenizer.from_another_model", "tokenizer",
               "GPT-2's 50257-token vocab.json and merges.txt beside a model whose embedding has 1000 rows", other,
               other);

  // Folders with vocab.json + merges.txt only (no tokenizer.json), one of them broken.
  auto gpt2Files = [&](const std::string& id, const std::string& description, const std::string& name,
                       const std::string& bytes) {
    const auto folder = b.model(id);
    fs::remove(folder + "/tokenizer.json");
    writeBytes(folder + "/" + name, bytes);
    b.folderCase(id, "tokenizer", description, folder, folder + "/" + name);
  };
  gpt2Files("tokenizer.merges_bad_line", "merges.txt has a line with three tokens instead of a pair", "merges.txt",
            readBytes(kFixtures + "/tiny-random-gpt2/merges.txt") + "a b c\n");
  json vocab = json::parse(readBytes(kFixtures + "/tiny-random-gpt2/vocab.json"));
  auto negative = vocab;
  negative["!"] = -7;
  gpt2Files("tokenizer.vocab_negative_id", "vocab.json maps a token to the id -7", "vocab.json", negative.dump());
  auto fractional = vocab;
  fractional["!"] = "twelve";
  gpt2Files("tokenizer.vocab_non_integer_id", "vocab.json maps a token to the string \"twelve\"", "vocab.json",
            fractional.dump());

  const auto folder = b.model("tokenizer.vocab_txt_non_utf8", "bert-tiniest");
  fs::remove(folder + "/tokenizer.json");
  std::string vocabTxt = readBytes(folder + "/vocab.txt");
  vocabTxt.insert(vocabTxt.find("\nthe\n") + 1, "caf\xe9\n");  // Latin-1 'é'
  writeBytes(folder + "/vocab.txt", vocabTxt);
  b.folderCase("tokenizer.vocab_txt_non_utf8", "tokenizer", "BERT vocab.txt (no tokenizer.json) holds a Latin-1 line",
               folder, folder + "/vocab.txt");
}

}  // namespace hh::test::bad_inputs

namespace hh::test {

namespace fs = std::filesystem;

namespace {

std::string fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(h));
  return buffer;
}

}  // namespace

std::vector<BadInput> buildBadInputs(const std::string& dir) {
  bad_inputs::Builder b;
  b.root = fs::absolute(dir).lexically_normal().string();
  if (!b.root.empty() && b.root.back() == '/') b.root.pop_back();
  bad_inputs::checkpointCases(b);
  bad_inputs::configCases(b);
  bad_inputs::tokenizerCases(b);
  bad_inputs::datasetCases(b);
  bad_inputs::projectCases(b);
  bad_inputs::runCases(b);
  bad_inputs::exportCases(b);
  return b.out;
}

std::vector<std::string> fingerprints(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const auto& path : files) {
    std::error_code ec;
    if (!fs::exists(path, ec))
      out.push_back("missing");
    else if (!fs::is_regular_file(path, ec))
      out.push_back("not a regular file");
    else {
      std::ifstream in(path, std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      out.push_back(std::to_string(s.str().size()) + " bytes, fnv1a " + fnv1a(s.str()));
    }
  }
  return out;
}

}  // namespace hh::test
