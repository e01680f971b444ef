// Which positions of a forward pass return logits: none (a prefill that only
// fills the KV cache), the last one (generation), or all (a graft check, a
// logits dump). Its own header, so both executors can name it.
#pragma once

namespace kvg {

enum class LogitsFor { None, Last, All };

}  // namespace kvg
