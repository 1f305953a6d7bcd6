// The fork server for kvconform-libtorch (zygote.h). No LibTorch here: the launcher links it.
#include "zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "kvconform/engine/model.h"

extern char** environ;

namespace kvc::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kIdle = std::chrono::seconds(30);  // a server holds about 70 MB of its own: few linger
constexpr int kStartTimeoutMs = 60000;
// Variables that differ from test to test and that nothing reads at start-up: the child gets them.
// kvconform's own (KVC_*) are read by the run itself, in the child, never by a static initialiser;
// tests set them per run (a temporary folder, a seed), and each value would otherwise get a server.
const std::set<std::string> kVolatile = {"PYTEST_CURRENT_TEST", "_", "OLDPWD", "PWD", "SHLVL"};
bool volatile_variable(const std::string& name) { return kVolatile.count(name) || name.rfind("KVC_", 0) == 0; }
// Limits a test may lower for the run (ulimit): the child takes the launcher's.
constexpr int kLimits[] = {RLIMIT_AS, RLIMIT_CORE, RLIMIT_CPU, RLIMIT_DATA, RLIMIT_FSIZE, RLIMIT_NOFILE};

std::string folder() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const char* cache = std::getenv("KVC_CACHE");
  const char* home = std::getenv("HOME");
  std::string base = runtime && *runtime ? runtime
                     : cache && *cache   ? cache
                     : home && *home     ? std::string(home) + "/.cache/kvconform"
                                         : "";
  if (base.empty()) return "";
  for (size_t i = 1; i <= base.size(); ++i)
    if (i == base.size() || base[i] == '/') mkdir(base.substr(0, i).c_str(), 0755);
  const std::string dir = base + "/zygote";
  mkdir(dir.c_str(), 0700);
  struct stat st {};
  // Whoever can connect runs code as us: only a folder of ours that no one else can enter.
  if (stat(dir.c_str(), &st) != 0 || st.st_uid != getuid() || (st.st_mode & 077) != 0) return "";
  return dir;
}

std::vector<std::string> environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

std::string key(const std::string& binary, const struct stat& st) {
  std::vector<std::string> env;
  for (const std::string& e : environment())
    if (!volatile_variable(e.substr(0, e.find('=')))) env.push_back(e);
  std::sort(env.begin(), env.end());
  std::string joined;
  for (const std::string& e : env) joined += e + '\0';
  const std::string file = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
                           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  return kvc::engine::content_digest({binary, file, joined, std::to_string(getuid())});
}

sockaddr_un address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

int connect_to(const std::string& path) {
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  const sockaddr_un a = address(path);
  if (connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) return s;
  close(s);
  return -1;
}

bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A line from the server ("" where it closed the connection first).
std::string read_line(int fd) {
  std::string line;
  char c;
  for (;;) {
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    if (c == '\n') return line;
    line += c;
  }
}

// Starts `binary --zygote-serve PATH FD` in its own session, its streams on /dev/null (a test's
// output pipes stay with the test), no child of ours, and waits until it listens.
bool start_server(const std::string& binary, const std::string& path) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return false;
  const std::string fd_text = "3";
  const pid_t pid = fork();
  if (pid == 0) {
    if (fork() != 0) _exit(0);
    setsid();
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0), dup2(null, 1), dup2(null, 2);
    dup2(ready[1], 3);  // without CLOEXEC
    for (int fd = 4; fd < 4096; ++fd) close(fd);
    if (chdir("/") != 0) _exit(127);
    execl(binary.c_str(), binary.c_str(), kZygoteServeFlag, path.c_str(), fd_text.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(ready[1]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  pollfd p{ready[0], POLLIN, 0};
  char c = 0;
  const bool ok = pid > 0 && poll(&p, 1, kStartTimeoutMs) == 1 && read(ready[0], &c, 1) == 1 && c == '1';
  close(ready[0]);
  return ok;
}

// One sendmsg or recvmsg of `size` bytes with room for the three standard descriptors.
struct Message {
  Message(char* bytes, size_t size) : iov{bytes, size} {
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof control;
  }
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  iovec iov;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr header{};
};

int g_connection = -1;

void forward_signal(int sig) {
  char line[32];
  const int n = std::snprintf(line, sizeof line, "kill %d\n", sig);
  if (n > 0) (void)!send(g_connection, line, static_cast<size_t>(n), MSG_NOSIGNAL);
}

}  // namespace

void hand_off_to_zygote(const std::string& binary, char** argv) {
  const char* on = std::getenv("KVC_ZYGOTE");
  if (!on || std::string(on) != "1") return;
  const std::string dir = folder();
  struct stat st {};
  if (dir.empty() || stat(binary.c_str(), &st) != 0) return;
  const std::string path = dir + "/t-" + key(binary, st).substr(0, 24);
  if (path.size() >= sizeof(sockaddr_un::sun_path)) return;
  int s = connect_to(path);
  if (s < 0) {
    const int lock = open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (lock < 0) return;
    flock(lock, LOCK_EX);  // one server per key: the others wait for it
    s = connect_to(path);
    if (s < 0 && start_server(binary, path)) s = connect_to(path);
    close(lock);
  }
  if (s < 0) return;

  json request;
  request["argv"] = json::array();
  for (char** a = argv; *a; ++a) request["argv"].push_back(*a);
  std::vector<char> cwd(4096);
  if (!getcwd(cwd.data(), cwd.size())) return (void)close(s);
  request["cwd"] = cwd.data();
  request["env"] = environment();
  const mode_t mask = umask(022);
  umask(mask);
  request["umask"] = mask;
  struct sigaction pipe_action {};
  sigaction(SIGPIPE, nullptr, &pipe_action);
  request["sigpipe_ignored"] = pipe_action.sa_handler == SIG_IGN;
  json limits = json::array();
  for (int r : kLimits) {
    rlimit l{};
    getrlimit(r, &l);
    limits.push_back({r, l.rlim_cur, l.rlim_max});
  }
  request["limits"] = limits;
  const std::string body = request.dump();
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::string frame(reinterpret_cast<const char*>(&n), 4);
  frame += body;

  // The frame's first bytes carry the three standard descriptors.
  const int fds[3] = {0, 1, 2};
  Message msg(frame.data(), frame.size());
  cmsghdr* c = CMSG_FIRSTHDR(&msg.header);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t sent;
  do sent = sendmsg(s, &msg.header, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  if (sent <= 0 || (static_cast<size_t>(sent) < frame.size() && !write_all(s, frame.substr(static_cast<size_t>(sent)))))
    return (void)close(s);
  if (read_line(s).rfind("started ", 0) != 0) return (void)close(s);  // the server went away: exec as always

  // The child owns stdin and stdout now: the host sees their ends close when the child's do.
  const int null = open("/dev/null", O_RDWR);
  dup2(null, 0), dup2(null, 1);
  close(null);
  g_connection = s;
  struct sigaction forward {};
  forward.sa_handler = forward_signal;
  sigemptyset(&forward.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &forward, nullptr);
  const std::string status = read_line(s);
  int value = 0;
  if (std::sscanf(status.c_str(), "exit %d", &value) == 1) _exit(value);
  if (std::sscanf(status.c_str(), "signal %d", &value) == 1) {
    signal(value, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, value);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    raise(value);
    _exit(128 + value);
  }
  std::cerr << "kvconform: the fork server lost the run (" << (status.empty() ? "connection closed" : status) << ")\n";
  _exit(2);
}

namespace {

int g_wake = -1;

void on_child(int) {
  const int saved = errno;
  (void)!write(g_wake, "c", 1);
  errno = saved;
}

// A request: its JSON and the three descriptors that came with it (false: not a whole one).
bool receive(int s, json& request, std::vector<int>& fds) {
  timeval timeout{10, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string data(65536, '\0');
  Message msg(data.data(), data.size());
  const ssize_t got = recvmsg(s, &msg.header, MSG_CMSG_CLOEXEC);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg.header); c; c = CMSG_NXTHDR(&msg.header, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
  if (got < 4 || fds.size() != 3) return false;
  data.resize(static_cast<size_t>(got));
  uint32_t n;
  std::memcpy(&n, data.data(), 4);
  while (data.size() < 4 + size_t{n}) {
    std::string more(4 + size_t{n} - data.size(), '\0');
    const ssize_t m = read(s, more.data(), more.size());
    if (m <= 0) return false;
    data.append(more.data(), static_cast<size_t>(m));
  }
  try {
    request = json::parse(data.substr(4, n));
  } catch (const json::exception&) {
    return false;
  }
  timeval none{0, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  return true;
}

// In the forked child: become the launcher's run, then main's work.
[[noreturn]] void run_child(const json& request, const std::vector<int>& fds, const std::function<int(int, char**)>& run) {
  for (int i = 0; i < 3; ++i) dup2(fds[static_cast<size_t>(i)], i);
  for (int fd : fds)
    if (fd > 2) close(fd);
  if (chdir(request["cwd"].get<std::string>().c_str()) != 0) {
    std::cerr << "kvconform: cannot enter " << request["cwd"].get<std::string>() << ": " << std::strerror(errno) << "\n";
    _exit(2);
  }
  umask(request["umask"].get<mode_t>());
  clearenv();
  for (const std::string& e : request["env"].get<std::vector<std::string>>()) putenv(strdup(e.c_str()));
  signal(SIGPIPE, request["sigpipe_ignored"].get<bool>() ? SIG_IGN : SIG_DFL);
  for (const json& l : request["limits"]) {
    const rlimit r{l[1].get<rlim_t>(), l[2].get<rlim_t>()};
    setrlimit(l[0].get<int>(), &r);
  }
  static std::vector<std::string> args;
  args = request["argv"].get<std::vector<std::string>>();
  static std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::exit(run(static_cast<int>(args.size()), argv.data()));
}

}  // namespace

int serve_zygote(int argc, char** argv, const std::function<int(int, char**)>& run) {
  if (argc != 4) {
    std::cerr << "usage: kvconform-libtorch " << kZygoteServeFlag << " SOCKET READY_FD (started by kvconform)\n";
    return 2;
  }
  const std::string path = argv[2];
  const int ready = std::atoi(argv[3]);
  unlink(path.c_str());  // a dead server's: our starter holds the lock
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_un a = address(path);
  struct stat st {};
  if (listener < 0 || bind(listener, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || listen(listener, 64) != 0 ||
      stat(path.c_str(), &st) != 0)
    return 1;
  const ino_t inode = st.st_ino;
  (void)!write(ready, "1", 1);
  close(ready);

  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  g_wake = wake[1];
  struct sigaction child_action {};
  child_action.sa_handler = on_child;
  child_action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&child_action.sa_mask);
  sigaction(SIGCHLD, &child_action, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::map<pid_t, int> children;  // the run's pid -> its launcher's connection (-1: that launcher is gone)
  std::map<int, pid_t> connections;
  auto last_busy = Clock::now();
  for (;;) {
    std::vector<pollfd> polled = {{listener, POLLIN, 0}, {wake[0], POLLIN, 0}};
    for (const auto& [fd, pid] : connections) polled.push_back({fd, POLLIN, 0});
    if (poll(polled.data(), polled.size(), 1000) < 0 && errno != EINTR) return 1;
    char drain[64];
    while (read(wake[0], drain, sizeof drain) > 0) {
    }
    if (polled[0].revents & POLLIN) {
      const int s = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      json request;
      std::vector<int> fds;
      if (s >= 0 && receive(s, request, fds)) {
        const pid_t pid = fork();
        if (pid == 0) {
          signal(SIGCHLD, SIG_DFL);
          signal(SIGPIPE, SIG_DFL);
          for (int fd : {listener, wake[0], wake[1], s}) close(fd);
          for (const auto& [fd, other] : connections) close(fd);
          run_child(request, fds, run);
        }
        for (int fd : fds) close(fd);
        if (pid > 0 && write_all(s, "started " + std::to_string(pid) + "\n")) {
          children[pid] = s;
          connections[s] = pid;
        } else {
          if (pid > 0) kill(pid, SIGKILL), children[pid] = -1;
          close(s);
        }
      } else {
        for (int fd : fds) close(fd);
        if (s >= 0) close(s);
      }
    }
    for (size_t i = 2; i < polled.size(); ++i) {
      if (!(polled[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int fd = polled[i].fd;
      const pid_t pid = connections[fd];
      char buffer[256];
      const ssize_t n = read(fd, buffer, sizeof buffer);
      if (n > 0) {  // "kill N" lines: a signal the launcher received
        std::string lines(buffer, static_cast<size_t>(n));
        for (size_t at = 0; (at = lines.find("kill ", at)) != std::string::npos; at += 5)
          kill(pid, std::atoi(lines.c_str() + at + 5));
        continue;
      }
      kill(pid, SIGKILL);  // the launcher died (a timeout's SIGKILL): so does its run
      close(fd);
      connections.erase(fd);
      children[pid] = -1;
    }
    int status;
    pid_t done;
    while ((done = waitpid(-1, &status, WNOHANG)) > 0) {
      const auto it = children.find(done);
      if (it == children.end()) continue;
      if (it->second >= 0) {
        write_all(it->second, (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                   : "exit " + std::to_string(WEXITSTATUS(status))) +
                                  "\n");
        close(it->second);
        connections.erase(it->second);
      }
      children.erase(it);
    }
    if (!children.empty()) {
      last_busy = Clock::now();
    } else if (Clock::now() - last_busy > kIdle) {
      struct stat now {};
      if (stat(path.c_str(), &now) == 0 && now.st_ino == inode) {
        unlink(path.c_str());
        unlink((path + ".lock").c_str());  // one per environment ever seen would pile up
      }
      return 0;
    }
  }
}

}  // namespace kvc::cli
