// log_capture.h -- collects the error records (DlogRecord level >= DLOG_ERROR) logged on
// the calling thread while it lives; nests. Internal to sim/src/host.
#pragma once

#include <string>
#include <vector>

namespace acl_fa_sim {
namespace host {

class LogCapture {
 public:
    LogCapture();
    ~LogCapture();
    LogCapture(const LogCapture &) = delete;
    LogCapture &operator=(const LogCapture &) = delete;
    const std::vector<std::string> &Errors() const { return errors_; }
    std::string Joined() const;  // "first; second; ..."

 private:
    std::vector<std::string> errors_;
    std::vector<std::string> *previous_;
};

}  // namespace host
}  // namespace acl_fa_sim
