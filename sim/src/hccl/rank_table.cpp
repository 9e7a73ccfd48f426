// rank_table.cpp -- HCCL rank table files, as HcclCommInitClusterInfo reads them.
//
// Format (docs/hccl.md, "Clusters"): a JSON object with "version" "1.0" or "1.2", "server_count"
// and "server_list": one object per server with "server_id" and "device", a list of
// {"device_id", "device_ip", "rank_id"} (version 1.2 adds fields such as "super_device_id",
// which are accepted and ignored); "status" is "completed" when present. Numbers are JSON strings
// in the published examples; plain JSON numbers are accepted too. Only what the simulator needs
// is kept: per rank its device id and server id.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "hccl_internal.h"

namespace acl_fa_sim {
namespace hccl {
namespace {

// A JSON value: just enough of JSON for a rank table (objects, arrays, strings, numbers, literals).
struct Json {
    enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
    std::string text;                          // string, or a number's spelling
    std::vector<Json> items;                   // array
    std::vector<std::pair<std::string, Json>> fields;  // object, in file order
    const Json *Field(const char *name) const {
        for (const auto &f : fields) {
            if (f.first == name) return &f.second;
        }
        return nullptr;
    }
};

class Parser {
public:
    explicit Parser(const std::string &text) : s_(text) {}
    bool Parse(Json *out, std::string *error) {
        if (!Value(out, 0)) {
            *error = error_ + " at byte " + std::to_string(pos_);
            return false;
        }
        Space();
        if (pos_ != s_.size()) {
            *error = "text after the JSON value at byte " + std::to_string(pos_);
            return false;
        }
        return true;
    }

private:
    void Space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
    }
    bool Fail(const char *what) {
        error_ = what;
        return false;
    }
    bool String(std::string *out) {
        if (pos_ >= s_.size() || s_[pos_] != '"') return Fail("expected a string");
        ++pos_;
        while (pos_ < s_.size() && s_[pos_] != '"') {
            char c = s_[pos_++];
            if (c == '\\') {
                if (pos_ >= s_.size()) return Fail("unterminated escape");
                char e = s_[pos_++];
                switch (e) {
                    case 'n': c = '\n'; break;
                    case 't': c = '\t'; break;
                    case 'r': c = '\r'; break;
                    case 'b': c = '\b'; break;
                    case 'f': c = '\f'; break;
                    case 'u':  // kept as ASCII when it is; a rank table's fields are ASCII
                        if (pos_ + 4 > s_.size()) return Fail("short \\u escape");
                        c = static_cast<char>(strtol(s_.substr(pos_, 4).c_str(), nullptr, 16) & 0x7f);
                        pos_ += 4;
                        break;
                    default: c = e;
                }
            }
            out->push_back(c);
        }
        if (pos_ >= s_.size()) return Fail("unterminated string");
        ++pos_;
        return true;
    }
    bool Value(Json *out, int depth) {
        if (depth > 32) return Fail("nesting deeper than 32");
        Space();
        if (pos_ >= s_.size()) return Fail("unexpected end of the file");
        const char c = s_[pos_];
        if (c == '{') {
            out->kind = Json::kObject;
            ++pos_;
            Space();
            if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
            for (;;) {
                Space();
                std::string key;
                if (!String(&key)) return false;
                Space();
                if (pos_ >= s_.size() || s_[pos_] != ':') return Fail("expected ':'");
                ++pos_;
                out->fields.emplace_back(key, Json());
                if (!Value(&out->fields.back().second, depth + 1)) return false;
                Space();
                if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
                if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
                return Fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            out->kind = Json::kArray;
            ++pos_;
            Space();
            if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
            for (;;) {
                out->items.emplace_back();
                if (!Value(&out->items.back(), depth + 1)) return false;
                Space();
                if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
                if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
                return Fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            out->kind = Json::kString;
            return String(&out->text);
        }
        for (const char *literal : {"true", "false", "null"}) {
            if (s_.compare(pos_, strlen(literal), literal) == 0) {
                out->kind = literal[0] == 'n' ? Json::kNull : Json::kBool;
                out->text = literal;
                pos_ += strlen(literal);
                return true;
            }
        }
        const size_t start = pos_;
        while (pos_ < s_.size() && (isdigit(static_cast<unsigned char>(s_[pos_])) || strchr("+-.eE", s_[pos_]))) ++pos_;
        if (pos_ == start) return Fail("unexpected character");
        out->kind = Json::kNumber;
        out->text = s_.substr(start, pos_ - start);
        return true;
    }
    const std::string &s_;
    size_t pos_ = 0;
    std::string error_;
};

// A field that is a string (or a number), into *out; false with *error naming it at `where`.
bool TextField(const Json &object, const char *name, const std::string &where, std::string *out, std::string *error) {
    const Json *value = object.Field(name);
    if (value == nullptr || (value->kind != Json::kString && value->kind != Json::kNumber)) {
        *error = where + " has no \"" + name + "\" (a string)";
        return false;
    }
    *out = value->text;
    return true;
}

// A field holding a non-negative integer, as a JSON string ("3") or number (3).
bool IntField(const Json &object, const char *name, const std::string &where, long *out, std::string *error) {
    std::string text;
    if (!TextField(object, name, where, &text, error)) return false;
    char *end = nullptr;
    errno = 0;
    const long value = strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0 || value < 0) {
        *error = where + " \"" + name + "\" is \"" + text + "\", not an integer >= 0";
        return false;
    }
    *out = value;
    return true;
}

// FNV-1a, 64 bit: names the clique of one rank table's contents.
uint64_t Fnv1a(const std::string &text) {
    uint64_t hash = 1469598103934665603ULL;
    for (unsigned char c : text) {
        hash ^= c;
        hash *= 1099511628211ULL;
    }
    return hash;
}

}  // namespace

bool ReadRankTable(const char *path, std::vector<RankTableEntry> *ranks, std::string *digest, std::string *error) {
    const std::string where = std::string("rank table ") + path;
    FILE *file = fopen(path, "rb");
    if (file == nullptr) {
        *error = "cannot open " + where + ": " + strerror(errno);
        return false;
    }
    std::string text;
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), file)) > 0;) {
        text.append(buf, n);
        if (text.size() > (64u << 20)) break;
    }
    fclose(file);
    Json root;
    std::string parseError;
    if (!Parser(text).Parse(&root, &parseError)) {
        *error = where + " is not JSON: " + parseError;
        return false;
    }
    if (root.kind != Json::kObject) {
        *error = where + " is not a JSON object";
        return false;
    }
    std::string version;
    if (!TextField(root, "version", where, &version, error)) return false;
    if (version != "1.0" && version != "1.2") {
        *error = where + " has version \"" + version + "\"; the simulator reads versions 1.0 and 1.2";
        return false;
    }
    const Json *status = root.Field("status");
    if (status != nullptr && status->text != "completed") {
        *error = where + " has status \"" + status->text + "\", not \"completed\"";
        return false;
    }
    const Json *servers = root.Field("server_list");
    if (servers == nullptr || servers->kind != Json::kArray || servers->items.empty()) {
        *error = where + " has no \"server_list\" (a non-empty list of servers)";
        return false;
    }
    std::map<long, RankTableEntry> byRank;
    std::set<std::string> serverIds;
    for (size_t s = 0; s < servers->items.size(); ++s) {
        const Json &server = servers->items[s];
        const std::string at = where + " server_list[" + std::to_string(s) + "]";
        if (server.kind != Json::kObject) {
            *error = at + " is not an object";
            return false;
        }
        std::string serverId;
        if (!TextField(server, "server_id", at, &serverId, error)) return false;
        if (serverId.empty() || serverId.size() >= kServerIdBytes) {
            *error = at + " server_id \"" + serverId + "\" must have 1 to " + std::to_string(kServerIdBytes - 1) +
                     " characters";
            return false;
        }
        if (!serverIds.insert(serverId).second) {
            *error = at + " repeats server_id \"" + serverId + "\"";
            return false;
        }
        const Json *devices = server.Field("device");
        if (devices == nullptr || devices->kind != Json::kArray || devices->items.empty()) {
            *error = at + " has no \"device\" (a non-empty list)";
            return false;
        }
        std::map<long, long> deviceRank;
        for (size_t d = 0; d < devices->items.size(); ++d) {
            const Json &device = devices->items[d];
            const std::string dat = at + ".device[" + std::to_string(d) + "]";
            if (device.kind != Json::kObject) {
                *error = dat + " is not an object";
                return false;
            }
            long deviceId = 0, rankId = 0;
            if (!IntField(device, "device_id", dat, &deviceId, error)) return false;
            if (!IntField(device, "rank_id", dat, &rankId, error)) return false;
            if (deviceRank.count(deviceId)) {
                *error = dat + " repeats device_id " + std::to_string(deviceId) + " of rank " +
                         std::to_string(deviceRank[deviceId]) + " on server \"" + serverId + "\"";
                return false;
            }
            deviceRank[deviceId] = rankId;
            if (byRank.count(rankId)) {
                *error = dat + " repeats rank_id " + std::to_string(rankId) + " (server \"" +
                         byRank[rankId].server + "\" device " + std::to_string(byRank[rankId].device) + ")";
                return false;
            }
            RankTableEntry entry;
            entry.rank = static_cast<uint32_t>(rankId);
            entry.device = static_cast<int32_t>(deviceId);
            entry.server = serverId;
            const Json *ip = device.Field("device_ip");
            if (ip != nullptr) entry.deviceIp = ip->text;
            byRank[rankId] = entry;
        }
    }
    const Json *count = root.Field("server_count");
    long serverCount = 0;
    if (count != nullptr && (!IntField(root, "server_count", where, &serverCount, error) ||
                             static_cast<size_t>(serverCount) != servers->items.size())) {
        if (error->empty()) {
            *error = where + " has server_count " + std::to_string(serverCount) + " but lists " +
                     std::to_string(servers->items.size()) + " servers";
        }
        return false;
    }
    const long n = static_cast<long>(byRank.size());
    if (n > static_cast<long>(kMaxRanks)) {
        *error = where + " lists " + std::to_string(n) + " ranks; the simulator's limit is " + std::to_string(kMaxRanks);
        return false;
    }
    ranks->clear();
    for (long r = 0; r < n; ++r) {
        if (!byRank.count(r)) {
            *error = where + " has no rank_id " + std::to_string(r) + ": the " + std::to_string(n) +
                     " ranks must be numbered 0 .. " + std::to_string(n - 1);
            return false;
        }
        ranks->push_back(byRank[r]);
    }
    char hex[32];
    snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(Fnv1a(text)));
    *digest = hex;
    return true;
}

}  // namespace hccl
}  // namespace acl_fa_sim
