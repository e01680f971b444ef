#include "engine/kv_storage.hpp"

#include "storage/kv_codec.hpp"

namespace kvg {

uint32_t kv_dtype_of(KvStorage storage) {
  switch (storage) {
    case KvStorage::F32: return kKvDtypeF32;
    case KvStorage::BF16: return kKvDtypeBf16;
    case KvStorage::I8: return kKvDtypeI8;
  }
  return kKvDtypeF32;
}

KvRowRounding kv_rounding_of(KvStorage storage) {
  switch (storage) {
    case KvStorage::F32: return KvRowRounding::None;
    case KvStorage::BF16: return KvRowRounding::Bf16;
    case KvStorage::I8: return KvRowRounding::I8;
  }
  return KvRowRounding::None;
}

const char* kv_storage_name(KvStorage storage) {
  switch (storage) {
    case KvStorage::F32: return "f32";
    case KvStorage::BF16: return "bf16";
    case KvStorage::I8: return "i8";
  }
  return "f32";
}

std::optional<KvStorage> parse_kv_storage(std::string_view name) {
  for (KvStorage s : {KvStorage::F32, KvStorage::BF16, KvStorage::I8})
    if (name == kv_storage_name(s)) return s;
  return std::nullopt;
}

std::string recipe_with_kv_storage(std::string_view arithmetic, KvStorage storage) {
  std::string name(arithmetic);
  if (storage != KvStorage::F32) name += std::string("+kv-") + kv_storage_name(storage);
  return name;
}

}  // namespace kvg
