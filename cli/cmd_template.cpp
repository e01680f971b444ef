// `kvg template`: the knowledge template a model says it reads (the GGUF key
// kvg.knowledge_template, engine/model.hpp), shown, or set on a copy of the
// model. The copy holds every other metadata pair and every tensor as the
// input has them (same order, same bytes, the input's alignment); only the
// key is added, or replaced where it was. The key does not change the math,
// so the copy computes exactly what the original does; its fingerprint (the
// file's SHA-256) is of course another.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "engine/gguf/gguf_file.hpp"
#include "engine/knowledge_prompt.hpp"
#include "engine/model.hpp"
#include "tools/gguf_writer.hpp"

namespace kvg::cli {

namespace {

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

// One scalar of `type` as the file encodes it (little-endian, its own width).
void put_scalar(std::vector<uint8_t>& out, gguf::ValueType type, const gguf::Value& v) {
  using gguf::ValueType;
  switch (type) {
    case ValueType::U8: case ValueType::BOOL: put<uint8_t>(out, uint8_t(v.u)); return;
    case ValueType::U16: put<uint16_t>(out, uint16_t(v.u)); return;
    case ValueType::U32: put<uint32_t>(out, uint32_t(v.u)); return;
    case ValueType::U64: put<uint64_t>(out, v.u); return;
    case ValueType::I8: put<int8_t>(out, int8_t(v.i)); return;
    case ValueType::I16: put<int16_t>(out, int16_t(v.i)); return;
    case ValueType::I32: put<int32_t>(out, int32_t(v.i)); return;
    case ValueType::I64: put<int64_t>(out, v.i); return;
    case ValueType::F32: put<float>(out, float(v.f)); return;  // read from an f32: exact
    case ValueType::F64: put<double>(out, v.f); return;
    default: throw Error(ErrorCode::Unsupported, std::string("kvg template: a scalar of type ") +
                                                     gguf::value_type_name(type));
  }
}

// A metadata value's bytes after its type, as they are in the file.
std::vector<uint8_t> encode_value(const gguf::Value& v) {
  using gguf::ValueType;
  std::vector<uint8_t> out;
  if (v.type == ValueType::STRING) {
    put_string(out, v.s);
  } else if (v.type == ValueType::ARRAY) {
    put<uint32_t>(out, uint32_t(v.array_type));
    put<uint64_t>(out, v.array_count);
    if (v.array_type == ValueType::STRING) {
      for (const std::string_view s : v.strings) put_string(out, s);
    } else {
      const uint64_t n = v.array_count * *gguf::scalar_size(v.array_type);
      out.insert(out.end(), v.array_data, v.array_data + n);
    }
  } else {
    put_scalar(out, v.type, v);
  }
  return out;
}

// --set's text: \n, \t, \r and \\ are escapes (the form `kvg template`
// prints), so a template fits on a command line; a real newline is taken as is.
std::string unescape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (next) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      default:
        throw Error(ErrorCode::InvalidArgument,
                    std::string("--set: \"\\") + (next ? std::string(1, next) : std::string()) +
                        "\" is not an escape (\\n, \\t, \\r, \\\\)");
    }
    ++i;
  }
  return out;
}

// The template as --set takes it back, quoted.
std::string escaped(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(b, ec) && fs::equivalent(a, b, ec)) return true;
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

int show(const gguf::File& file, const std::string& path) {
  const gguf::Value* v = file.find(kKnowledgeTemplateKey);
  if (!v) {
    std::printf("%s: no %s (knowledge prompts use the model's chat format, or the default %s)\n", path.c_str(),
                std::string(kKnowledgeTemplateKey).c_str(), escaped(kDefaultKnowledgeTemplate).c_str());
    return 0;
  }
  if (v->type != gguf::ValueType::STRING) {
    std::printf("%s: %s is %s, not a string: kvg refuses to load this model\n", path.c_str(),
                std::string(kKnowledgeTemplateKey).c_str(), gguf::value_type_name(v->type));
    return 1;
  }
  std::printf("%s = %s\n", std::string(kKnowledgeTemplateKey).c_str(), escaped(v->s).c_str());
  try {
    (void)KnowledgeTemplate::parse(v->s);
  } catch (const Error& e) {
    std::printf("not a knowledge template (%s): kvg refuses to load this model\n", e.what());
    return 1;
  }
  return 0;
}

void write_copy(const gguf::File& file, const std::string& out, const std::string& tmpl) {
  gguf::Writer w;
  w.set_version(file.version());
  bool replaced = false, aligned = false;
  for (const gguf::KeyValue& kv : file.metadata()) {
    if (kv.key == kKnowledgeTemplateKey) {
      w.add_string(kv.key, tmpl);  // where it was
      replaced = true;
      continue;
    }
    w.add_raw(kv.key, uint32_t(kv.value.type), encode_value(kv.value));
    aligned = aligned || kv.key == "general.alignment";
  }
  if (!replaced) w.add_string(kKnowledgeTemplateKey, tmpl);
  // The input's alignment for the tensor data. set_alignment rewrites the
  // general.alignment pair in place as the u32 the format specifies (what
  // every writer puts there); without the key the default, 32, applies.
  if (aligned) w.set_alignment(uint32_t(file.alignment()));
  for (const gguf::TensorInfo& t : file.tensors()) {
    const uint8_t* data = t.data;
    const uint64_t n = t.n_bytes;
    w.add_tensor(t.name, t.ne, t.type, [data, n](gguf::TensorSink& sink) { sink.write(data, n); });
  }
  w.write(out);
  file.check_intact();  // the input was not truncated under us while it was copied
}

}  // namespace

int cmd_template(const Args& args) {
  const std::string in = args.get("model");
  if (!args.has("set")) {
    if (args.has("out")) throw Error(ErrorCode::InvalidArgument, "--out needs --set (the template to write)");
    return show(*gguf::File::open(in), in);
  }
  const std::string tmpl = unescape(args.get("set"));
  try {
    (void)KnowledgeTemplate::parse(tmpl);
  } catch (const Error& e) {
    throw Error(ErrorCode::InvalidArgument, std::string("--set ") + escaped(tmpl) + ": " + e.what());
  }
  if (!args.has("out")) throw Error(ErrorCode::InvalidArgument, "--set needs --out (the copy to write)");
  const std::string out = args.get("out");
  if (same_file(in, out))
    throw Error(ErrorCode::InvalidArgument,
                "--out is the input model: kvg template writes a copy (the input's fingerprint stays what it was)");
  const std::shared_ptr<const gguf::File> file = gguf::File::open(in);
  write_copy(*file, out, tmpl);
  std::printf("%s: %s = %s\n", out.c_str(), std::string(kKnowledgeTemplateKey).c_str(), escaped(tmpl).c_str());
  return 0;
}

}  // namespace kvg::cli
