#include "transport/shm/shm_domain.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace herd::transport::shm {

constexpr uint64_t kMagic = 0x6d68732d64726568ull;  // "herd-shm"
constexpr uint32_t kVersion = 1;
constexpr size_t kPage = 4096;
constexpr size_t kLine = 64;
constexpr uint64_t kClaiming = ~uint64_t{0};  // a lane's key while its claimer resets it

enum State : uint32_t { kNone = 0, kAttached = 1, kAborted = 2, kClosed = 3 };

struct Header {
  uint64_t magic;
  uint32_t version;
  uint32_t members;
  uint32_t lanes;
  uint32_t stages;
  uint64_t stage_bytes;
  uint64_t total_bytes;
  std::atomic<uint32_t> ready;                    // the leader wrote the geometry
  alignas(kLine) std::atomic<uint32_t> attached;  // futex word: members attached so far
  std::atomic<uint32_t> sleepers;
};
static_assert(sizeof(Header) <= kPage);

struct Control {
  std::atomic<uint32_t> state;
  uint32_t identity_len;
  int64_t pid;
  char identity[512];
  std::atomic<uint32_t> reason_len;
  char reason[3000];
};
static_assert(sizeof(Control) <= kPage);

struct LaneHeader {
  alignas(kLine) std::atomic<uint64_t> key;
  uint64_t signature;                        // the claimer's, written before the key
  int32_t claimer;                           // its local index
  alignas(kLine) std::atomic<uint32_t> gen;  // futex word: bumped by every publish
  std::atomic<uint32_t> sleepers;
  alignas(kLine) std::atomic<uint32_t> left;  // members done with the current operation
};
// Behind each lane header: members x 3 counters, one cache line each.

namespace {

size_t RoundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

// Per member: three counters and a doorbell (futex word and sleeper count), a line each.
constexpr int kLinesPerMember = 4;
size_t LaneStride(int members) {
  return RoundUp(sizeof(LaneHeader) + members * kLinesPerMember * kLine, kPage);
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t NamespaceInode(const char* kind) {
  struct stat st {};
  if (::stat(absl::StrFormat("/proc/self/ns/%s", kind).c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

// /proc/<pid>/stat: state (field 3) and start time (field 22); false if there is no such process.
bool ReadProcStat(int64_t pid, char* state, uint64_t* start) {
  std::ifstream in(absl::StrFormat("/proc/%d/stat", pid));
  std::string text;
  if (!in || !std::getline(in, text)) return false;
  // The command (field 2) is in parentheses and may hold spaces: parse after the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::vector<std::string> f = absl::StrSplit(text.substr(close + 2), ' ');
  if (f.size() < 20 || f[0].empty()) return false;
  *state = f[0][0];
  return absl::SimpleAtoi(f[19], start);
}

// Dead, a zombie, or another process under the same pid (start time differs).
bool ProcessGone(int64_t pid, uint64_t start_time) {
  char state = 0;
  uint64_t start = 0;
  if (!ReadProcStat(pid, &state, &start)) return true;
  if (state == 'Z' || state == 'X') return true;
  return start_time != 0 && start != start_time;
}

int PidfdOpen(int64_t pid) {
#if defined(SYS_pidfd_open)
  return static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

int CpusAvailable() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return static_cast<int>(std::thread::hardware_concurrency());
  return CPU_COUNT(&set);
}

absl::StatusOr<long> EnvNumber(const char* name, long lo, long hi, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == 0) return fallback;
  long out = 0;
  if (!absl::SimpleAtoi(v, &out) || out < lo || out > hi) {
    return absl::InvalidArgumentError(
        absl::StrFormat("$%s is '%s'; expected an integer in [%d, %d]", name, v, lo, hi));
  }
  return out;
}

std::string Errno(const char* what) {
  return absl::StrFormat("%s: %s", what, std::strerror(errno));
}

}  // namespace

absl::StatusOr<DomainConfig> DomainConfig::FromEnvironment() {
  DomainConfig c;
  HERD_ASSIGN_OR_RETURN(long lanes, EnvNumber("HERD_SHM_LANES", 1, 64, c.lanes));
  HERD_ASSIGN_OR_RETURN(long stages, EnvNumber("HERD_SHM_STAGES", 1, 64, c.stages));
  HERD_ASSIGN_OR_RETURN(long bytes, EnvNumber("HERD_SHM_STAGE_BYTES", 4096, long{1} << 30,
                                              static_cast<long>(c.stage_bytes)));
  c.lanes = static_cast<int>(lanes);
  c.stages = static_cast<int>(stages);
  c.stage_bytes = RoundUp(static_cast<size_t>(bytes), kPage);
  return c;
}

size_t DomainConfig::SegmentBytes(int members) const {
  return kPage + members * kPage + lanes * LaneStride(members) +
         static_cast<size_t>(lanes) * members * stages * RoundUp(stage_bytes, kPage);
}

// --- Pointers into the mapping.

Header* Domain::header() const { return reinterpret_cast<Header*>(base_); }
Control* Domain::control(int local) const {
  return reinterpret_cast<Control*>(base_ + kPage + local * kPage);
}
LaneHeader* Domain::lane(int l) const {
  return reinterpret_cast<LaneHeader*>(base_ + lane_offset_ + l * lane_stride_);
}
std::atomic<uint64_t>* Domain::counter(int l, int local, int c) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(base_ + lane_offset_ + l * lane_stride_ +
                                                  sizeof(LaneHeader) +
                                                  (local * kLinesPerMember + c) * kLine);
}

std::atomic<uint32_t>* Domain::bell(int l, int local) const {
  return reinterpret_cast<std::atomic<uint32_t>*>(counter(l, local, 3));
}

std::string Domain::SegmentPrefix() {
  return absl::StrFormat("herd-shm-%x-", NamespaceInode("pid"));
}

int Domain::RemoveStaleSegments() {
  const std::string prefix = SegmentPrefix();
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(dir)) {
    std::string_view name = e->d_name;
    if (!name.starts_with(prefix)) continue;
    std::string_view rest = name.substr(prefix.size());
    const std::string_view digits = rest.substr(0, rest.find('-'));
    int64_t pid = 0;
    if (!absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &pid) || pid <= 0) {
      continue;
    }
    const bool dead = (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ||
                      ProcessGone(pid, /*start_time=*/0);
    if (dead) stale.emplace_back(name);
  }
  ::closedir(dir);
  int removed = 0;
  for (const std::string& name : stale) {
    if (::shm_unlink(("/" + name).c_str()) == 0) {
      ++removed;
      Log().info("shm: removed /dev/shm/{}, left by a process that died", name);
    }
  }
  return removed;
}

uint64_t Domain::Key(uint8_t kind, uint32_t id, uint64_t instance) {
  return 1 + ((uint64_t{kind} << 56) | (uint64_t{id & 0xfffffu} << 36) |
              (instance & ((uint64_t{1} << 36) - 1)));
}

uint64_t Domain::NextInstance(uint8_t kind, uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  return instances_[(uint64_t{kind} << 32) | id]++;
}

absl::StatusOr<std::unique_ptr<Domain>> Domain::Join(const JoinOptions& o, Deadline deadline) {
  if (o.members.size() < 1 || o.index < 0 || o.index >= static_cast<int>(o.members.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shm domain: member index %d out of range [0, %d)", o.index, o.members.size()));
  }
  std::unique_ptr<Domain> d(new Domain());
  absl::Status st = d->Attach(o, deadline);
  if (!st.ok()) return st;  // the destructor unmaps and unlinks what Attach made
  return d;
}

absl::Status Domain::Attach(const JoinOptions& o, Deadline deadline) {
  comm_ = o.comm;
  peer_status_ = o.peer_status;
  members_ = o.members;
  size_ = static_cast<int>(members_.size());
  index_ = o.index;
  leader_ = index_ == 0;
  oversubscribed_ = size_ > CpusAvailable();
  name_ = absl::StrFormat("/%s%d-%016x", SegmentPrefix(), members_[0].pid, o.nonce);
  const std::string where =
      absl::StrFormat("shm segment %s of rank %d", name_, members_[index_].rank);

  // Watch every peer from the start: one that dies before it attaches is named too.
  pidfds_.assign(size_, -1);
  start_times_.assign(size_, 0);
  for (int q = 0; q < size_; ++q) {
    const int64_t pid = members_[q].pid;
    if (q == index_ || pid <= 0 || pid == ::getpid()) continue;
    pidfds_[q] = PidfdOpen(pid);
    if (pidfds_[q] < 0) {
      char state = 0;
      if (!ReadProcStat(pid, &state, &start_times_[q])) {
        return absl::UnavailableError(absl::StrFormat(
            "%s: rank %d (pid %d, on this host) is not running", where, members_[q].rank, pid));
      }
    }
  }

  int fd = -1;
  size_t bytes = 0;
  if (leader_) {
    RemoveStaleSegments();
    const DomainConfig& c = o.config;
    bytes = c.SegmentBytes(size_);
    fd = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return absl::FailedPreconditionError(Errno((where + ": shm_open").c_str()));
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const std::string e = Errno((where + ": ftruncate").c_str());
      ::close(fd);
      ::shm_unlink(name_.c_str());
      return absl::FailedPreconditionError(e);
    }
  } else {
    // The leader may not have created it yet: retry until the deadline, naming it if it died.
    auto pause = std::chrono::microseconds(100);
    while (true) {
      fd = ::shm_open(name_.c_str(), O_RDWR, 0600);
      if (fd >= 0) {
        struct stat st {};
        if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kPage) {
          bytes = static_cast<size_t>(st.st_size);
          break;
        }
        ::close(fd);  // created, not sized yet
        fd = -1;
      } else if (errno != ENOENT) {
        return absl::FailedPreconditionError(Errno((where + ": shm_open").c_str()));
      }
      HERD_RETURN_IF_ERROR(CheckPeers(/*poll_pids=*/true));
      if (deadline.expired()) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "%s: rank %d (the host's leader) did not create it in time", where, members_[0].rank));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(5000));
    }
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    if (leader_) ::shm_unlink(name_.c_str());
    return absl::FailedPreconditionError(Errno((where + ": mmap").c_str()));
  }
  base_ = static_cast<std::byte*>(p);
  bytes_ = bytes;

  Header* h = header();
  if (leader_) {
    h->magic = kMagic;
    h->version = kVersion;
    h->members = static_cast<uint32_t>(size_);
    h->lanes = static_cast<uint32_t>(o.config.lanes);
    h->stages = static_cast<uint32_t>(o.config.stages);
    h->stage_bytes = RoundUp(o.config.stage_bytes, kPage);
    h->total_bytes = bytes;
    h->ready.store(1, std::memory_order_release);
  } else {
    while (h->ready.load(std::memory_order_acquire) == 0) {
      HERD_RETURN_IF_ERROR(CheckPeers(/*poll_pids=*/true));
      if (deadline.expired()) {
        return absl::DeadlineExceededError(
            absl::StrFormat("%s: rank %d did not initialise it in time", where, members_[0].rank));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (h->magic != kMagic || h->version != kVersion ||
        h->members != static_cast<uint32_t>(size_) || h->total_bytes != bytes) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: not a herd segment for %d members (magic %x, version %d, members %d, %d of %d "
          "bytes)",
          where, size_, h->magic, h->version, h->members, h->total_bytes, bytes));
    }
  }
  lanes_ = static_cast<int>(h->lanes);
  stages_ = static_cast<int>(h->stages);
  stage_bytes_ = h->stage_bytes;
  lane_stride_ = LaneStride(size_);
  lane_offset_ = kPage + size_ * kPage;
  stage_offset_ = lane_offset_ + lanes_ * lane_stride_;

  Control* me = control(index_);
  me->pid = ::getpid();
  me->identity_len = static_cast<uint32_t>(std::min(o.identity.size(), sizeof me->identity));
  std::memcpy(me->identity, o.identity.data(), me->identity_len);
  me->state.store(kAttached, std::memory_order_release);
  Bump(&h->attached, &h->sleepers);

  HERD_RETURN_IF_ERROR(WaitWord(
      [&]() -> int {
        for (int q = 0; q < size_; ++q) {
          if (control(q)->state.load(std::memory_order_acquire) == kNone) return q;
        }
        return -1;
      },
      &h->attached, &h->sleepers, deadline, where));
  if (leader_) {
    ::shm_unlink(name_.c_str());
    unlinked_ = true;
  }
  for (int q = 0; q < size_; ++q) {
    const Control* c = control(q);
    const std::string_view identity(c->identity, c->identity_len);
    if (identity != std::string_view(o.identity).substr(0, sizeof c->identity) ||
        (members_[q].pid > 0 && c->pid != members_[q].pid)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: rank %d (pid %d) attached with host identity '%s', expected '%s' (pid %d)", where,
          members_[q].rank, c->pid, identity, o.identity, members_[q].pid));
    }
  }
  return absl::OkStatus();
}

Domain::~Domain() {
  if (base_ != nullptr) {
    uint32_t attached = kAttached;
    control(index_)->state.compare_exchange_strong(attached, kClosed, std::memory_order_acq_rel);
    WakeAll();
    ::munmap(base_, bytes_);
  }
  if (leader_ && !unlinked_ && !name_.empty()) ::shm_unlink(name_.c_str());
  for (int fd : pidfds_) {
    if (fd >= 0) ::close(fd);
  }
}

void Domain::Abort(const absl::Status& why) {
  if (base_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  Control* me = control(index_);
  if (me->state.load(std::memory_order_acquire) != kAttached) return;
  const std::string text(why.message());
  const size_t n = std::min(text.size(), sizeof me->reason);
  std::memcpy(me->reason, text.data(), n);
  me->reason_len.store(static_cast<uint32_t>(n), std::memory_order_relaxed);
  me->state.store(kAborted, std::memory_order_release);
  WakeAll();
}

void Domain::WakeAll() {
  if (base_ == nullptr) return;
  Bump(&header()->attached, &header()->sleepers);
  for (int l = 0; l < lanes_; ++l) {
    Bump(&lane(l)->gen, &lane(l)->sleepers);
    for (int q = 0; q < size_; ++q) Bump(bell(l, q), bell(l, q) + 1);
  }
}

void Domain::Bump(std::atomic<uint32_t>* word, std::atomic<uint32_t>* sleepers) {
  word->fetch_add(1, std::memory_order_seq_cst);
  if (sleepers->load(std::memory_order_seq_cst) > 0) Futex(word, FUTEX_WAKE, INT_MAX, nullptr);
}

void Domain::Sleep(std::atomic<uint32_t>* word, uint32_t seen, std::atomic<uint32_t>* sleepers,
                   Deadline deadline) {
  auto left =
      std::min<std::chrono::nanoseconds>(deadline.remaining(), std::chrono::milliseconds(10));
  if (left.count() <= 0) return;
  timespec ts{static_cast<time_t>(left.count() / 1'000'000'000),
              static_cast<long>(left.count() % 1'000'000'000)};
  sleepers->fetch_add(1, std::memory_order_seq_cst);
  if (word->load(std::memory_order_seq_cst) == seen) Futex(word, FUTEX_WAIT, seen, &ts);
  sleepers->fetch_sub(1, std::memory_order_seq_cst);
}

absl::Status Domain::CheckPeers(bool poll_pids) {
  if (base_ != nullptr) {
    for (int q = 0; q < size_; ++q) {
      const Control* c = control(q);
      const uint32_t state = c->state.load(std::memory_order_acquire);
      if (q == index_) {
        if (state == kAborted) {
          const uint32_t n = c->reason_len.load(std::memory_order_relaxed);
          return absl::UnavailableError(
              std::string(c->reason, std::min<size_t>(n, sizeof c->reason)));
        }
        continue;
      }
      if (state == kAborted) {
        const uint32_t n = c->reason_len.load(std::memory_order_relaxed);
        return absl::UnavailableError(
            absl::StrFormat("rank %d aborted its communicator: %s", members_[q].rank,
                            std::string_view(c->reason, std::min<size_t>(n, sizeof c->reason))));
      }
      if (state == kClosed) {
        return absl::UnavailableError(
            absl::StrFormat("rank %d closed its communicator", members_[q].rank));
      }
      if (peer_status_) {
        if (absl::Status s = peer_status_(q); !s.ok()) {
          return absl::UnavailableError(
              absl::StrFormat("rank %d died: %s", members_[q].rank, s.message()));
        }
      }
    }
  }
  if (comm_ != nullptr) {
    if (absl::Status own = comm_->status(); !own.ok()) return own;
  }
  if (!poll_pids) return absl::OkStatus();
  std::vector<pollfd> fds;
  std::vector<int> who;
  for (int q = 0; q < size_; ++q) {
    if (pidfds_[q] >= 0) {
      fds.push_back({pidfds_[q], POLLIN, 0});
      who.push_back(q);
    } else if (start_times_[q] != 0 && ProcessGone(members_[q].pid, start_times_[q])) {
      return absl::UnavailableError(absl::StrFormat("rank %d (pid %d, on this host) died",
                                                    members_[q].rank, members_[q].pid));
    }
  }
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) {
        const Member& m = members_[who[i]];
        return absl::UnavailableError(
            absl::StrFormat("rank %d (pid %d, on this host) died", m.rank, m.pid));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Domain::WaitWord(absl::FunctionRef<int()> lagging, std::atomic<uint32_t>* word,
                              std::atomic<uint32_t>* sleepers, Deadline deadline,
                              std::string_view what) {
  return WaitOn(
      lagging, [&](int) { return std::make_pair(word, sleepers); }, deadline, what);
}

absl::Status Domain::WaitOn(absl::FunctionRef<int()> lagging, WordOf word_of, Deadline deadline,
                            std::string_view what) {
  // Spin first, unless the members outnumber the cores: then the member waited for is likely
  // not running, and the core is better handed over at once.
  const int64_t spin_until = NowNanos() + (oversubscribed_ ? 2'000 : 50'000);
  for (int i = 0;; ++i) {
    if (lagging() < 0) return absl::OkStatus();
    if ((i & 63) == 63 && NowNanos() > spin_until) break;
    CpuRelax();
  }
  while (true) {
    // The word of the member waited for, read before the predicate: a publish after this
    // read changes it, so the futex wait below cannot miss it.
    const int who = lagging();
    if (who < 0) return absl::OkStatus();
    const auto [word, sleepers] = word_of(who);
    const uint32_t seen = word->load(std::memory_order_seq_cst);
    const int again = lagging();
    if (again < 0) return absl::OkStatus();
    if (again != who) continue;
    const int64_t now = NowNanos();
    int64_t next = next_pid_check_ns_.load(std::memory_order_relaxed);
    const bool poll_pids = now >= next && next_pid_check_ns_.compare_exchange_strong(
                                              next, now + 2'000'000, std::memory_order_relaxed);
    if (absl::Status st = CheckPeers(poll_pids); !st.ok()) {
      if (lagging() < 0) return absl::OkStatus();  // it finished, then closed
      return absl::Status(st.code(), absl::StrFormat("%s: %s", what, st.message()));
    }
    if (deadline.expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s: deadline exceeded waiting for rank %d (on this host)", what, members_[who].rank));
    }
    Sleep(word, seen, sleepers, deadline);
  }
}

absl::StatusOr<LaneOp> Domain::Enter(uint64_t key, uint64_t signature, Deadline deadline,
                                     std::string_view what) {
  const int l = static_cast<int>(Mix(key) % static_cast<uint64_t>(lanes_));
  LaneHeader* h = lane(l);
  while (true) {
    uint64_t k = h->key.load(std::memory_order_acquire);
    if (k == key) {
      if (h->signature != signature) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: rank %d called it with another count, dtype or options than this rank "
            "(signature %016x, here %016x); every rank must pass the same",
            what, members_[h->claimer].rank, h->signature, signature));
      }
      break;
    }
    if (k == 0 && h->key.compare_exchange_strong(k, kClaiming, std::memory_order_acq_rel)) {
      // Every member left the previous operation: nobody reads these until the key appears.
      for (int q = 0; q < size_; ++q) {
        for (int c = 0; c < 3; ++c) counter(l, q, c)->store(0, std::memory_order_relaxed);
      }
      h->left.store(0, std::memory_order_relaxed);
      h->signature = signature;
      h->claimer = index_;
      h->key.store(key, std::memory_order_release);
      Bump(&h->gen, &h->sleepers);
      break;
    }
    // Another operation holds the lane (or is claiming it): wait for the key to change.
    HERD_RETURN_IF_ERROR(WaitWord(
        [&]() -> int {
          const uint64_t now = h->key.load(std::memory_order_acquire);
          return now == key || now == 0 ? -1 : index_;
        },
        &h->gen, &h->sleepers, deadline,
        absl::StrFormat("%s (waiting for lane %d, held by another operation)", what, l)));
  }
  LaneOp op;
  op.domain_ = this;
  op.lane_ = l;
  return op;
}

// --- LaneOp.

LaneOp& LaneOp::operator=(LaneOp&& other) noexcept {
  if (this != &other) {
    if (active()) Leave();
    domain_ = std::exchange(other.domain_, nullptr);
    lane_ = std::exchange(other.lane_, -1);
  }
  return *this;
}

LaneOp::~LaneOp() {
  if (active()) Leave();
}

std::byte* LaneOp::stage(int local, int s) const {
  const Domain& d = *domain_;
  return d.base_ + d.stage_offset_ +
         ((static_cast<size_t>(lane_) * d.size_ + local) * d.stages_ + s) * d.stage_bytes_;
}

void LaneOp::Publish(Counter c, uint64_t value) {
  domain_->counter(lane_, domain_->index_, c)->store(value, std::memory_order_release);
  // Only the members waiting for this one sleep on its doorbell.
  std::atomic<uint32_t>* b = domain_->bell(lane_, domain_->index_);
  domain_->Bump(b, b + 1);
}

uint64_t LaneOp::Get(int local, Counter c) const {
  return domain_->counter(lane_, local, c)->load(std::memory_order_acquire);
}

int LaneOp::Lagging(Counter c, uint64_t value) const {
  for (int q = 0; q < domain_->size_; ++q) {
    if (Get(q, c) < value) return q;
  }
  return -1;
}

absl::Status LaneOp::Wait(absl::FunctionRef<int()> lagging, Deadline deadline,
                          std::string_view what) {
  Domain& d = *domain_;
  LaneHeader* h = d.lane(lane_);
  const int lane = lane_;
  return d.WaitOn(
      lagging,
      [&](int who) {
        // The member waited for rings its doorbell on every publish; a waiter that names
        // itself (nothing to wait for but a wake-up) sleeps on the lane's word.
        if (who == d.index_) return std::make_pair(&h->gen, &h->sleepers);
        std::atomic<uint32_t>* b = d.bell(lane, who);
        return std::make_pair(b, b + 1);
      },
      deadline, what);
}

void LaneOp::Leave() {
  Domain& d = *domain_;
  LaneHeader* h = d.lane(lane_);
  if (h->left.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(d.size_)) {
    h->key.store(0, std::memory_order_release);
    d.Bump(&h->gen, &h->sleepers);
  }
  domain_ = nullptr;
  lane_ = -1;
}

}  // namespace herd::transport::shm
