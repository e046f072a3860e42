#include "bench/proc_cpu.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace farm::bench {

double ProcessCpuSeconds(pid_t pid, bool reaped, pid_t* ppid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  // The command name, field 2, may hold spaces: fields after it only.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(line.substr(close + 2));
  std::vector<std::string> field;  // field[0] is stat's field 3 (state)
  for (std::string t; in >> t && field.size() < 15;) field.push_back(t);
  if (field.size() < 15) return 0;
  if (ppid != nullptr) *ppid = static_cast<pid_t>(std::atoll(field[1].c_str()));
  double ticks = std::atof(field[11].c_str()) + std::atof(field[12].c_str());
  if (reaped) ticks += std::atof(field[13].c_str()) + std::atof(field[14].c_str());
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double PostgresCpuSeconds(pid_t postmaster) {
  double out = ProcessCpuSeconds(postmaster, /*reaped=*/true);
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoll(e->d_name));
    if (pid <= 0 || pid == postmaster) continue;
    pid_t parent = 0;
    const double cpu = ProcessCpuSeconds(pid, /*reaped=*/true, &parent);
    if (parent == postmaster) out += cpu;
  }
  closedir(proc);
  return out;
}

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

}  // namespace farm::bench
