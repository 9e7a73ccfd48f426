// slog.cpp -- toolchain/slog.h on the host: level filter, stderr sink, and the per-thread
// capture the op runtime uses to report why a TilingFunc failed (log_capture.h).
#include "toolchain/slog.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "log_capture.h"

namespace acl_fa_sim {
namespace host {
namespace {
thread_local std::vector<std::string> *tCapture = nullptr;

int32_t GlobalLevel() {
    const char *env = std::getenv("ASCEND_GLOBAL_LOG_LEVEL");
    if (env == nullptr || *env < '0' || *env > '4') return DLOG_ERROR;
    return *env - '0';
}

// dlog_* prefix "[file:line]" is for log files; a captured reason reads better without it.
std::string WithoutSourcePrefix(const std::string &line) {
    if (line.empty() || line[0] != '[') return line;
    const size_t close = line.find(']');
    const size_t colon = line.rfind(':', close);
    if (close == std::string::npos || colon == std::string::npos || colon + 1 == close) return line;
    for (size_t i = colon + 1; i < close; ++i) {
        if (line[i] < '0' || line[i] > '9') return line;
    }
    return line.substr(close + 1);
}

bool PrintToStdout() {
    const char *env = std::getenv("ASCEND_SLOG_PRINT_TO_STDOUT");
    return env != nullptr && std::string(env) == "1";
}
}  // namespace

LogCapture::LogCapture() : previous_(tCapture) { tCapture = &errors_; }
LogCapture::~LogCapture() { tCapture = previous_; }

std::string LogCapture::Joined() const {
    std::string out;
    for (const auto &line : errors_) out += (out.empty() ? "" : "; ") + line;
    return out;
}

}  // namespace host
}  // namespace acl_fa_sim

extern "C" int32_t CheckLogLevel(int32_t, int32_t logLevel) {
    return logLevel >= acl_fa_sim::host::GlobalLevel() ? 1 : 0;
}

extern "C" void DlogRecord(int32_t moduleId, int32_t level, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    std::string line(buf);
    while (!line.empty() && line.back() == '\n') line.pop_back();
    if (level >= DLOG_ERROR && acl_fa_sim::host::tCapture != nullptr) {
        acl_fa_sim::host::tCapture->push_back(acl_fa_sim::host::WithoutSourcePrefix(line));
    }
    if (CheckLogLevel(moduleId, level) == 1 && acl_fa_sim::host::PrintToStdout()) {
        static const char *const kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
        std::fprintf(stdout, "[%s] %s\n", level >= 0 && level <= DLOG_ERROR ? kNames[level] : "EVENT", line.c_str());
    }
}
