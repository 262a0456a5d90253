#pragma once
// A `herd` process whose state lives on a small disk of its own: the process is started in
// its own user and mount namespace (`unshare -rm`) with a tmpfs of a few MiB mounted on its
// state directory. Filling that tmpfs gives the process real ENOSPC errors from the kernel,
// without touching the machine's disks; freeing it gives the space back.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace herd::testing {

class SmallDiskProcess {
 public:
  // Whether this machine lets an unprivileged process mount a tmpfs in its own namespaces.
  static bool Supported();

  // Runs `herd args... --port-file port_file` with a `size_mib` tmpfs on `mount_point` (which
  // must exist) and waits for the port. Fails the test if it ends or does not serve in time.
  void Start(const std::string& mount_point, int size_mib, std::vector<std::string> args,
             const std::string& port_file, const std::string& log_path,
             std::chrono::seconds patience = std::chrono::seconds(20));
  ~SmallDiskProcess() { Stop(9); }
  void Stop(int sig);

  // Writes a ballast file on the tmpfs until the kernel says the disk is full; returns its
  // size in bytes. Free() deletes it.
  int64_t Fill();
  void Free();

  bool Alive();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string log() const;

 private:
  std::string Ballast() const;

  pid_t pid_ = -1;
  int port_ = 0;
  std::string mount_point_, log_path_;
};

}  // namespace herd::testing
