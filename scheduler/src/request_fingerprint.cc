// RequestFingerprint: what makes two CreateSandbox requests "the same request" for the
// client request-id check, stable across processes (it is journaled).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "flotilla/scheduler/scale_unit.h"

namespace flotilla::scheduler {

uint64_t RequestFingerprint(const v1::CreateSandboxRequest& request) {
  v1::CreateSandboxRequest copy = request;
  copy.clear_request_id();
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);  // map fields in key order
    copy.SerializeToCodedStream(&out);
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace flotilla::scheduler
