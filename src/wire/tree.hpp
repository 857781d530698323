// A small document tree for the Dynamo decoders, which read the same RouterEvent shape from
// JSON text and from msgpack: both parse into this tree (every node keeps the byte offset it
// starts at, for error reports), then one interpreter reads the tree (decode_dynamo.cpp).
//
// JSON is parsed by hand rather than with jansson: jansson's integers are long long, and it
// rejects every u64 above 2^63 ("too big integer"), which is half of all Dynamo block hashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvreg::wire {

struct Node {
    enum Kind : uint8_t { Nil, Bool, Uint, Int, Float, Str, Array, Map, Other } kind;
    size_t off;      // byte offset in the payload
    uint64_t u = 0;  // Uint, Bool
    int64_t i = 0;   // Int (negative)
    double f = 0;    // Float
    size_t str = 0;  // Str: offset in Tree::text
    size_t len = 0;  // Str: length
    size_t first = 0; // Array: kids[first .. first+count); Map: key, value pairs there
    size_t count = 0;
};

class Tree {
public:
    std::vector<Node> nodes;
    std::vector<size_t> kids;
    std::string text;

    void clear() noexcept { nodes.clear(), kids.clear(), text.clear(); }
    const Node &kid(const Node &n, size_t k) const noexcept { return nodes[kids[n.first + k]]; }
    bool is(const Node &n, const char *lit) const noexcept;
    // The value under key `name` of a map node, or nullptr.
    const Node *find(const Node &map, const char *name) const noexcept;
};

// Parse a whole payload into t (root = t.nodes[root]). false: err_off / err set.
bool parse_json(const uint8_t *p, size_t len, Tree &t, size_t &root, size_t &err_off,
                const char *&err);
bool parse_msgpack(const uint8_t *p, size_t len, Tree &t, size_t &root, size_t &err_off,
                   const char *&err);

} // namespace kvreg::wire
