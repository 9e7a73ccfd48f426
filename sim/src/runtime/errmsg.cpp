// errmsg.cpp -- per-thread error messages: aclGetRecentErrMsg, aclfaSimSetErrMsg.
//
// As CANN documents (RT docs/zh/api_ref/13_exception_handling.md, default thread mode):
// messages of failed calls accumulate per thread; aclGetRecentErrMsg returns them newest
// first and clears them; the returned pointer stays valid until the thread's next call;
// nullptr when there is nothing to report.
#include <cstdarg>
#include <cstdio>
#include <deque>
#include <string>

#include "rt_internal.h"

namespace acl_fa_sim {
namespace rt {
namespace {

// Oldest messages are dropped past this many (a caller that never reads them must not grow
// memory without bound).
constexpr size_t kMaxPendingMessages = 32;

thread_local std::deque<std::string> t_pending;  // newest first
thread_local std::string t_returned;             // what the last aclGetRecentErrMsg returned

void PushMessage(const char *fmt, va_list args) {
    char buf[2048];
    vsnprintf(buf, sizeof(buf), fmt, args);
    t_pending.emplace_front(buf);
    if (t_pending.size() > kMaxPendingMessages) t_pending.pop_back();
}

}  // namespace

aclError Fail(aclError code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    PushMessage(fmt, args);
    va_end(args);
    return code;
}

}  // namespace rt
}  // namespace acl_fa_sim

using namespace acl_fa_sim::rt;

extern "C" {

void aclfaSimSetErrMsg(const char *fmt, ...) {
    if (fmt == nullptr) return;
    va_list args;
    va_start(args, fmt);
    PushMessage(fmt, args);
    va_end(args);
}

const char *aclGetRecentErrMsg() {
    if (t_pending.empty()) return nullptr;
    t_returned.clear();
    for (const std::string &message : t_pending) {
        if (!t_returned.empty()) t_returned += '\n';
        t_returned += message;
    }
    t_pending.clear();
    return t_returned.c_str();
}

}  // extern "C"
