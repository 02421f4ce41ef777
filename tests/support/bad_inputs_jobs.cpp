// The bad-input catalogue (see bad_inputs.h), job half: datasets, convert projects, run files and
// exports, each built by breaking one thing in a copy of a real fixture (bad_input_builder.h).
#include <hdf5.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "engine/runs/run_writer.h"
#include "tests/support/bad_input_builder.h"

namespace hh::test::bad_inputs {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

}  // namespace

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

}  // namespace hh::test::bad_inputs
