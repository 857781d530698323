#include "wire/media.hpp"

#include "kvreg_wire.h"

namespace kvreg::wire {
namespace {

bool eq_nocase(const char *s, size_t n, const char *lit) noexcept {
    size_t i = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (c >= 'a' && c <= 'z')
            c = static_cast<char>(c - 'a' + 'A');
        if (lit[i] == '\0' || c != lit[i])
            return false;
    }
    return lit[i] == '\0';
}

struct Alias {
    const char *name; // upper case
    uint32_t medium;
};

// Dynamo's from_kv_medium table plus its own StorageTier names and vLLM 0.26's FS / OBJ.
constexpr Alias kAliases[] = {
    {"GPU", KVREG_MEDIUM_GPU},          {"DEVICE", KVREG_MEDIUM_GPU},
    {"CPU", KVREG_MEDIUM_CPU},          {"CPU_PINNED", KVREG_MEDIUM_CPU},
    {"CPU_TIER1", KVREG_MEDIUM_CPU},    {"HOST_PINNED", KVREG_MEDIUM_CPU},
    {"STORAGE", KVREG_MEDIUM_STORAGE},  {"CPU_TIER2", KVREG_MEDIUM_STORAGE},
    {"DISK", KVREG_MEDIUM_STORAGE},     {"NVME", KVREG_MEDIUM_STORAGE},
    {"FS", KVREG_MEDIUM_STORAGE},       {"OBJ", KVREG_MEDIUM_STORAGE},
    {"EXTERNAL", KVREG_MEDIUM_EXTERNAL}, {"NETWORK", KVREG_MEDIUM_EXTERNAL},
    {"REMOTE", KVREG_MEDIUM_EXTERNAL},  {"SHARED", KVREG_MEDIUM_EXTERNAL},
};

} // namespace

const char *vllm_medium_name(uint32_t medium) noexcept {
    static const char *const names[KVREG_MEDIUM_COUNT] = {"GPU", "CPU", "STORAGE", "EXTERNAL"};
    return medium < KVREG_MEDIUM_COUNT ? names[medium] : "GPU";
}

const char *dynamo_tier_name(uint32_t medium) noexcept {
    static const char *const names[KVREG_MEDIUM_COUNT] = {"device", "host_pinned", "disk",
                                                          "external"};
    return medium < KVREG_MEDIUM_COUNT ? names[medium] : "device";
}

uint32_t medium_from_name(const char *s, size_t n) noexcept {
    for (const Alias &a : kAliases)
        if (eq_nocase(s, n, a.name))
            return a.medium;
    return KVREG_MEDIUM_UNKNOWN;
}

} // namespace kvreg::wire
