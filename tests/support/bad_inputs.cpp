// The bad-input catalogue (see bad_inputs.h). Every entry starts from a copy of a real fixture in
// tests/data and breaks exactly one thing, so the error a user sees is the one for that thing.
#include "tests/support/bad_inputs.h"

#include <hdf5.h>
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
#include "engine/runs/run_writer.h"

namespace hh::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixtures = HH_FIXTURES_DIR;

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

std::string deepJson(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

struct Builder {
  std::string root;
  std::vector<BadInput> out;

  BadInput& add(const std::string& id, const std::string& category, const std::string& description,
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
  // The tiny GPT-2 with a two-label sequence-classification head in <root>/<id>: a convert
  // project's classification task needs a teacher with that head (refused before any stage without).
  std::string classifier(const std::string& id) {
    const std::string fixture = kFixtures + "/tiny-random-gpt2", dir = root + "/" + id;
    models::saveModel(*models::loadModelForClassification(fixture, 2), dir, fixture);
    return dir;
  }
  // A fresh tiny GPT-2 copy in <root>/<id>; the case then breaks one file in it.
  std::string model(const std::string& id, const std::string& fixture = "tiny-random-gpt2") {
    return copyFixture(fixture, root + "/" + id);
  }
  // A model folder case: `hedgehog inspect FOLDER`, File > Open model folder.
  BadInput& folderCase(const std::string& id, const std::string& category, const std::string& description,
                       const std::string& folder, const std::string& file) {
    return add(id, category, description, file, {"inspect", folder}, GuiOpen::ModelFolder, folder);
  }
};

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

// A convert project: the tiny model, a run folder, one step per stage; `data` as given.
std::string writeProject(const std::string& path, const std::string& model, const std::string& runDir, const json& data,
                         const json& finetune, const std::string& evaluateTask = "lm") {
  json p{{"model", model},
         {"run_dir", runDir},
         {"data", data},
         {"distill", {{"steps", 1}, {"batch_size", 1}, {"eval_every", 1}, {"eval_batches", 1}}},
         {"finetune", finetune},
         {"evaluate", {{"max_sequences", 2}, {"table_sequences", 1}, {"batch_size", 1}, {"task", evaluateTask}}}};
  writeBytes(path, p.dump(2));
  return path;
}

void datasetCases(Builder& b) {
  const auto model = b.model("dataset.model");
  // A good corpus for the cases whose bad file is read later (classification data): ten documents,
  // so that the split by document leaves some for validation.
  const std::string good = b.root + "/dataset.good";
  fs::create_directory(good);
  const std::string readme = readBytes(HH_SOURCE_DIR "/README.md");
  for (size_t i = 0; i < 10; ++i)
    writeBytes(good + "/part" + std::to_string(i) + ".txt", readme.substr(i * readme.size() / 10, readme.size() / 10));
  auto lm = [&](const std::string& id, const std::string& description, const std::string& corpus,
                const std::string& file) {
    const auto project =
        writeProject(b.root + "/" + id + ".project.json", model, b.root + "/" + id + ".runs",
                     {{"corpus", corpus}, {"sequence_length", 8}, {"max_train_sequences", 8}}, {{"steps", 0}});
    auto& entry =
        b.add(id, "dataset", description, file, {"convert", "--config", project}, GuiOpen::ConvertProject, project);
    entry.preserved = {project};
    if (fs::is_regular_file(file)) entry.preserved.push_back(file);
  };
  std::string path = b.root + "/dataset.bad_line.jsonl";
  writeBytes(path, "{\"text\": \"a first document\"}\n{\"text\": \"cut off\n{\"text\": \"a third\"}\n");
  lm("dataset.jsonl_bad_line", "a .jsonl corpus whose second line is not JSON", path, path);
  path = b.root + "/dataset.text_not_string.jsonl";
  writeBytes(path, "{\"text\": \"a document\"}\n{\"text\": 42}\n");
  lm("dataset.jsonl_text_not_string", "a .jsonl corpus line whose \"text\" is a number", path, path);
  path = b.root + "/dataset.number_overflow.jsonl";
  writeBytes(path, "{\"text\": \"a document\"}\n{\"text\": \"another\", \"score\": 1e400}\n");
  lm("dataset.jsonl_number_overflow", "a .jsonl corpus line holding the number 1e400", path, path);
  path = b.root + "/dataset.latin1.txt";
  writeBytes(path, "Caf\xe9 au lait, cr\xe8me br\xfbl\xe9\x65 and other Latin-1 text.\n");
  lm("dataset.txt_non_utf8", "a .txt corpus in Latin-1, not UTF-8", path, path);
  path = b.root + "/dataset.empty_folder";
  fs::create_directory(path);
  lm("dataset.empty_folder", "the corpus folder holds no .txt files", path, path);
  path = b.root + "/dataset.folder_with_dir";
  fs::create_directories(path + "/chapter2.txt");
  writeBytes(path + "/chapter1.txt", "The first chapter.\n");
  lm("dataset.txt_is_directory", "a corpus folder in which chapter2.txt is a directory", path, path + "/chapter2.txt");

  // Classification data, read by the finetuning stage (classification task: the teacher has a
  // classification head and the evaluate stage the same task, else the project is refused first).
  const auto classifier = b.classifier("dataset.classifier");
  auto classification = [&](const std::string& id, const std::string& description, const std::string& tsv) {
    const std::string file = b.root + "/" + id + ".tsv";
    writeBytes(file, tsv);
    const auto project = writeProject(b.root + "/" + id + ".project.json", classifier, b.root + "/" + id + ".runs",
                                      {{"corpus", good}, {"sequence_length", 8}, {"max_train_sequences", 8}},
                                      {{"steps", 1},
                                       {"batch_size", 1},
                                       {"eval_every", 1},
                                       {"eval_batches", 1},
                                       {"task", "classification"},
                                       {"classification", {{"path", file}, {"sequence_length", 8}}}},
                                      "classification");
    auto& entry =
        b.add(id, "dataset", description, file, {"convert", "--config", project}, GuiOpen::ConvertProject, project);
    entry.preserved = {project, file};
  };
  classification("dataset.tsv_missing_label", "a classification .tsv line without a label (no tab)",
                 "label\ttext\n0\ta fine day\n1\ta bad day\nno label on this line\n");
  classification("dataset.tsv_non_integer_label", "a classification .tsv whose label 1.5 is not an integer",
                 "0\ta fine day\n1\ta bad day\n1.5\ta so-so day\n");
  classification("dataset.tsv_non_utf8", "a classification .tsv in Latin-1, not UTF-8",
                 "0\ta fine day\n1\ta caf\xe9 day\n");
}

void projectCases(Builder& b) {
  const auto model = b.model("project.model");
  auto project = [&](const std::string& id, const std::string& description, const std::string& bytes) {
    const std::string path = b.root + "/" + id + ".json";
    writeBytes(path, bytes);
    auto& entry = b.add(id, "project", description, path, {"convert", "--config", path}, GuiOpen::Project, path);
    entry.preserved = {path};
  };
  project("project.not_json", "the project file is cut off (not JSON)", "{\"model\": \"" + model + "\", \"data\": {");
  project("project.unknown_key", "the project file has a misspelt key \"feature_mapp\"",
          json{{"model", model}, {"feature_mapp", "hedgehog"}}.dump(2));
  project("project.wrong_type", "the project file says \"lr\": \"fast\"",
          json{{"model", model}, {"distill", {{"lr", "fast"}}}}.dump(2));
  project("project.deep_json", "the project file is 100000 nested JSON arrays", deepJson(100000));
  project("project.integer_wraps", "the project file says \"snapshot_size\": 4294967312 (2^32 + 16, past an int)",
          json{{"model", model}, {"distill", {{"snapshot_size", 4294967312u}}}}.dump(2));
  project("project.classification_fraction",
          "the project finetunes on classification data with \"validation_fraction\": 1 (nothing to train on)",
          json{{"model", model},
               {"finetune", {{"task", "classification"}, {"classification", {{"validation_fraction", 1.0}}}}},
               {"evaluate", {{"task", "classification"}}}}
              .dump(2));
  const std::string dir = b.root + "/project.is_directory.json";
  fs::create_directory(dir);
  b.add("project.is_directory", "project", "the project file is a directory", dir, {"convert", "--config", dir},
        GuiOpen::Project, dir);
}

// A real, finished run file written by the engine's RunWriter.
void writeRun(const std::string& path) {
  runs::RunHeader header;
  header.runId = "bad-inputs";
  header.kind = "distill";
  header.configJson = "{}";
  header.engineVersion = "test";
  header.device = "cpu";
  header.layout.scalars = {{"loss"}, {"lr"}};
  auto writer = runs::RunWriter::create(path, header);
  for (int step = 1; step <= 50; ++step) writer.appendScalars(step, {{"loss", 5.0 / step}, {"lr", 1e-3}});
  writer.log("fifty steps");
  writer.setStatus(runs::RunStatus::Completed, "done");
  writer.close();
}

void runCases(Builder& b) {
  auto run = [&](const std::string& id, const std::string& description, const std::string& path) {
    auto& entry = b.add(id, "run", description, path, {"run-info", path}, GuiOpen::RunFile, path);
    if (fs::is_regular_file(path)) entry.preserved = {path};
  };
  std::string path = b.root + "/run.truncated.h5";
  writeRun(path);
  fs::resize_file(path, fs::file_size(path) / 2);
  run("run.truncated", "run.h5 cut to half its size", path);

  path = b.root + "/run.not_hdf5.h5";
  writeBytes(path, "step,loss\n1,5.0\n2,2.5\n");
  run("run.not_hdf5", "run.h5 is a CSV file, not HDF5", path);

  path = b.root + "/run.empty.h5";
  writeBytes(path, "");
  run("run.empty", "run.h5 is 0 bytes", path);

  // Written by this engine, then marked as a schema version from the future.
  path = b.root + "/run.newer_schema.h5";
  writeRun(path);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t attr = file < 0 ? -1 : H5Aopen(file, "schema_version", H5P_DEFAULT);
    const int64_t future = runs::kSchemaVersion + 1;
    const bool ok = attr >= 0 && H5Awrite(attr, H5T_NATIVE_INT64, &future) >= 0;
    if (attr >= 0) H5Aclose(attr);
    if (file >= 0) H5Fclose(file);
    if (!ok) throw std::runtime_error("bad inputs: cannot rewrite the schema version of " + path);
  }
  run("run.newer_schema", "run.h5 from a newer schema version (" + std::to_string(runs::kSchemaVersion + 1) + ")",
      path);

  path = b.root + "/run.is_directory.h5";
  fs::create_directory(path);
  run("run.is_directory", "run.h5 is a directory", path);
}

void exportCases(Builder& b) {
  const auto model = b.model("export.model");
  auto exportCase = [&](const std::string& id, const std::string& description, const std::string& out,
                        const std::string& file) -> BadInput& {
    auto& entry = b.add(id, "export", description, file, {"export", model, "-o", out}, GuiOpen::ExportWeights, model);
    entry.exportTo = out;
    return entry;
  };
  // A previous good export (a complete model folder) that a failed export must leave as it was.
  std::string out = b.root + "/export.full_disk/model";
  copyFixture("tiny-random-gpt2", out);
  fs::remove(out + "/reference.safetensors");  // the fixture's test data: not something an export writes
  auto& full = exportCase("export.full_disk", "export onto a full disk (file size limit 64 KiB) over a previous export",
                          out, out);
  full.fileSizeLimitBytes = 64 * 1024;
  full.preserved = {out + "/config.json", out + "/model.safetensors", out + "/tokenizer.json"};

  out = b.root + "/export.out_is_file";
  writeBytes(out, "notes that must survive\n");
  exportCase("export.out_is_file", "the output path is an existing regular file", out, out).preserved = {out};

  // A folder of the user's at the output path: replacing it deleted everything in it, exit 0.
  out = b.root + "/export.out_holds_other_files";
  fs::create_directories(out + "/drafts");
  writeBytes(out + "/notes.txt", "notes that must survive\n");
  writeBytes(out + "/config.json", "{}\n");
  exportCase("export.out_holds_other_files", "the output folder holds the user's files, not a model's", out, out)
      .preserved = {out + "/notes.txt", out + "/config.json"};

  const std::string parent = b.root + "/export.read_only_parent";
  fs::create_directory(parent);
  writeBytes(parent + "/keep.txt", "kept\n");
  fs::permissions(parent, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  auto& readOnly = exportCase("export.parent_not_writable", "the output folder's parent is not writable",
                              parent + "/model", parent + "/model");
  readOnly.needsUnprivileged = true;
  readOnly.preserved = {parent + "/keep.txt"};
}

std::string fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(h));
  return buffer;
}

}  // namespace

std::vector<BadInput> buildBadInputs(const std::string& dir) {
  Builder b;
  b.root = fs::absolute(dir).lexically_normal().string();
  if (!b.root.empty() && b.root.back() == '/') b.root.pop_back();
  checkpointCases(b);
  configCases(b);
  tokenizerCases(b);
  datasetCases(b);
  projectCases(b);
  runCases(b);
  exportCases(b);
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
