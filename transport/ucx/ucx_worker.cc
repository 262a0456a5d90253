#include "transport/ucx/ucx_worker.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace herd::transport::ucx {

absl::Status UcsError(absl::StatusCode code, ucs_status_t s, std::string_view what) {
  return absl::Status(code, absl::StrFormat("%s: UCX %s", what, ucs_status_string(s)));
}

absl::StatusOr<std::unique_ptr<UcxWorker>> UcxWorker::Create(const WorkerConfig& config) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());

  // Configuration comes from the UCX_* environment, as with every UCX program; only the
  // rendezvous settings below are chosen here, and explicit UCX_* variables win.
  ucp_config_t* ucp_config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &ucp_config);
  if (s != UCS_OK) return UcsError(absl::StatusCode::kInternal, s, "reading UCX configuration");
  if (config.copy_through_fifo) {
    // No rendezvous: every message moves as eager fragments through the receiver's
    // shared-memory FIFO, so no transfer reads or writes another process's memory directly
    // (cma), which UCX 1.13 cannot survive when that process dies. The FIFO grows from 64
    // fragments of 8 KiB to 1024 of 16 KiB (16 MiB of shared memory per rank): a sender can
    // then hand over megabytes while its receiver is not running, which is what keeps 4-8 ranks
    // on two cores from waiting on each other (all-reduce throughput went from 0.05 to about
    // 1 GB/s). 64 KiB fragments overflow a 16-bit length in UCX 1.13's FIFO elements.
    // ZCOPY_THRESH=inf keeps TCP (ranks on other hosts) on buffered sends too: UCX 1.13's TCP
    // transport completes an outstanding zero-copy send twice when its endpoint fails and then
    // aborts the process (`uct_iface.h: Assertion comp->count > 0`), which killed a survivor
    // of a peer's death in 6 of 80 runs of UcxProcessTest.KilledRankOnAnotherHost...; with
    // buffered sends 160 of 160 passed. Shared memory never uses zero-copy sends.
    for (auto [name, value] :
         {std::pair{"RNDV_THRESH", "inf"}, std::pair{"MM_SEG_SIZE", "16384"},
          std::pair{"MM_FIFO_SIZE", "1024"}, std::pair{"ZCOPY_THRESH", "inf"}}) {
      if (std::getenv(absl::StrFormat("UCX_%s", name).c_str()) != nullptr) continue;
      s = ucp_config_modify(ucp_config, name, value);
      if (s != UCS_OK) {
        ucp_config_release(ucp_config);
        return UcsError(absl::StatusCode::kInternal, s,
                        absl::StrFormat("setting UCX %s=%s", name, value));
      }
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  s = ucp_init(&params, ucp_config, &w->context_);
  ucp_config_release(ucp_config);
  if (s != UCS_OK) return UcsError(absl::StatusCode::kUnavailable, s, "ucp_init");

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  s = ucp_worker_create(w->context_, &wparams, &w->worker_);
  if (s != UCS_OK) return UcsError(absl::StatusCode::kUnavailable, s, "ucp_worker_create");

  s = ucp_worker_get_efd(w->worker_, &w->event_fd_);
  if (s != UCS_OK) return UcsError(absl::StatusCode::kInternal, s, "ucp_worker_get_efd");

  ucp_address_t* address = nullptr;
  size_t length = 0;
  s = ucp_worker_get_address(w->worker_, &address, &length);
  if (s != UCS_OK) return UcsError(absl::StatusCode::kInternal, s, "ucp_worker_get_address");
  w->address_.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(w->worker_, address);
  return w;
}

UcxWorker::~UcxWorker() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

namespace {

// Splits `text` at any of `separators`, dropping empty pieces. (absl::StrSplit works on
// absl::string_view, which Debian's abseil keeps distinct from std::string_view.)
std::vector<std::string_view> Words(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> words;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find_first_of(separators, at);
    if (end == std::string_view::npos) end = text.size();
    if (end > at) words.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return words;
}

}  // namespace

std::string DescribeLanes(ucp_ep_h ep) {
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (stream == nullptr) return "";
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  const std::string info(text, size);
  std::free(text);
  // Lines look like "#  lane[0]:  2:sysv/memory.0 md[2]  -> md[2]/sysv/sysdev[255] am am_bw#0".
  std::string lanes;
  for (std::string_view line : Words(info, "\n")) {
    size_t at = line.find("lane[");
    if (at == std::string_view::npos) continue;
    std::vector<std::string_view> words = Words(line.substr(at), " ");
    if (words.size() < 2) continue;
    std::string_view resource = words[1];  // "2:sysv/memory.0"
    size_t colon = resource.find(':');
    if (colon != std::string_view::npos) resource.remove_prefix(colon + 1);
    if (!lanes.empty()) lanes += ' ';
    lanes += resource;
  }
  return lanes;
}

bool LanesAreSharedMemory(std::string_view lanes) {
  std::vector<std::string_view> words = Words(lanes, " ");
  if (words.empty()) return false;
  for (std::string_view lane : words) {
    std::string_view transport = lane.substr(0, lane.find('/'));
    if (transport != "sysv" && transport != "posix" && transport != "cma" && transport != "knem" &&
        transport != "xpmem" && transport != "self") {
      return false;
    }
  }
  return true;
}

}  // namespace herd::transport::ucx
