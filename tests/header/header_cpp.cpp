// The public header alone, compiled as C++11 and C++20 with -pedantic -Werror and the
// project's C++ warnings (-Wold-style-cast, -Wzero-as-null-pointer-constant...): engines
// include it from C++. Also pins that the declarations are noexcept and extern "C".
#include <kvreg.h>
#include <kvreg_wire.h>
#include <kvreg_index.h>
#include <kvreg_net.h>

#include <cstring>
#include <type_traits>

static_assert(noexcept(kvreg_strerror(0)), "declarations are noexcept in C++");
static_assert(noexcept(kvreg_registry_free(nullptr)), "declarations are noexcept in C++");
static_assert(noexcept(kvreg_wire_decoder_free(nullptr)), "kvreg_wire.h too");
static_assert(std::is_standard_layout<kvreg_wire_event>::value, "kvreg_wire_event is a C struct");
static_assert(noexcept(kvreg_index_free(nullptr)), "index declarations are noexcept in C++");
static_assert(std::is_standard_layout<kvreg_index_match>::value, "kvreg_index_match is a C struct");
static_assert(std::is_standard_layout<kvreg_index_depth>::value, "kvreg_index_depth is a C struct");
static_assert(std::is_same<kvreg_block, uint64_t>::value, "kvreg_block is a plain u64");
static_assert(std::is_standard_layout<kvreg_event>::value, "kvreg_event is a C struct");
static_assert(sizeof(void *) != 8 || sizeof(kvreg_event) == 88, "kvreg_event is 88 bytes on LP64");

extern "C" typedef void c_event_fn(const kvreg_event *, size_t, void *);
static_assert(std::is_same<kvreg_event_fn, c_event_fn *>::value, "C callback type");

static_assert(noexcept(kvreg_publisher_free(nullptr)), "kvreg_net.h declarations are noexcept");
static_assert(std::is_standard_layout<kvreg_sub_batch>::value, "kvreg_sub_batch is a C struct");

int main()
{
    if (kvreg_version_number() != KVREG_VERSION_NUMBER)
        return 1;
    return std::strcmp(kvreg_version_string(), KVREG_VERSION_STRING) == 0 ? 0 : 1;
}
