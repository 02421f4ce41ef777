// Sharded safetensors models (see safetensors.h): a `*.safetensors.index.json` maps tensor names
// to shard files in the index's directory; a plain `.safetensors` path is a single shard.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/io/safetensors.h"

namespace hh::io {
namespace {

[[noreturn]] void failIndex(const std::string& path, const std::string& problem, const std::string& hint) {
  throw FormatError("safetensors index '" + path + "': " + problem + ". Hint: " + hint);
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

nlohmann::json readIndex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) failIndex(path, "cannot open the file", "check that the path exists and is readable");
  std::stringstream buffer;
  buffer << in.rdbuf();
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::exception& e) {
    failIndex(path, std::string("not valid JSON (") + e.what() + ")", "re-download the index file");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object()) {
    failIndex(path, "no \"weight_map\" object", "an index maps tensor names to shard files");
  }
  return index;
}

// The shard file named for `tensor`, opened. Shards must be plain file names beside the index.
SafetensorsFile openShard(const std::string& path, const std::string& shard, const std::string& tensor) {
  if (shard.empty() || shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos ||
      shard.find("..") != std::string::npos) {
    failIndex(path, "shard name '" + shard + "' of tensor '" + tensor + "' would leave the index's directory",
              "shards must be plain file names beside the index; this index may be malicious");
  }
  const std::filesystem::path shardPath = std::filesystem::path(path).parent_path() / shard;
  std::error_code error;  // a name too long for the file system is an error here, not an exception
  if (!std::filesystem::exists(shardPath, error)) {
    failIndex(path,
              "shard '" + shard + "' (needed for tensor '" + tensor + "') does not exist" +
                  (error ? " (" + error.message() + ")" : ""),
              "download every shard listed in the index next to it");
  }
  try {
    return SafetensorsFile::open(shardPath.string());
  } catch (const FormatError& e) {
    failIndex(path, std::string("shard '") + shard + "' is unreadable: " + e.what(), "re-download that shard");
  }
}

}  // namespace

ShardedSafetensors ShardedSafetensors::open(const std::string& path) {
  refusePickle(path);
  ShardedSafetensors s;
  s.path_ = path;
  if (!endsWith(path, ".json")) {
    s.shards_.push_back(SafetensorsFile::open(path));
    for (const auto& name : s.shards_[0].names()) s.shardOf_[name] = 0;
    s.metadata_ = s.shards_[0].metadata();
    return s;
  }
  const nlohmann::json index = readIndex(path);
  if (index.contains("metadata") && index.at("metadata").is_object()) {
    for (const auto& [k, v] : index.at("metadata").items()) {
      s.metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  std::map<std::string, size_t> shardIndex;
  for (const auto& [name, shardJson] : index.at("weight_map").items()) {
    if (!shardJson.is_string()) failIndex(path, "shard of tensor '" + name + "' is not a string", "fix the index");
    const std::string shard = shardJson.get<std::string>();
    auto it = shardIndex.find(shard);
    if (it == shardIndex.end()) {
      s.shards_.push_back(openShard(path, shard, name));
      it = shardIndex.emplace(shard, s.shards_.size() - 1).first;
    }
    if (!s.shards_[it->second].contains(name)) {
      failIndex(path, "tensor '" + name + "' is mapped to shard '" + shard + "' but that shard does not contain it",
                "the index and the shards come from different versions; re-download them together");
    }
    s.shardOf_[name] = it->second;
  }
  return s;
}

std::vector<std::string> ShardedSafetensors::names() const {
  std::vector<std::string> out;
  out.reserve(shardOf_.size());
  for (const auto& kv : shardOf_) out.push_back(kv.first);
  return out;
}

const SafetensorsFile& ShardedSafetensors::shardFor(const std::string& name) const {
  const auto it = shardOf_.find(name);
  if (it == shardOf_.end()) {
    throw FormatError("safetensors model '" + path_ + "': no tensor named '" + name +
                      "'. Hint: call names() to list the " + std::to_string(shardOf_.size()) +
                      " tensors it holds");
  }
  return shards_[it->second];
}

const TensorInfo& ShardedSafetensors::info(const std::string& name) const { return shardFor(name).info(name); }

}  // namespace hh::io
