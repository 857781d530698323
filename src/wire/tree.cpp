#include "tree.hpp"

#include "mp_read.hpp"

#include <cstdlib>
#include <cstring>

namespace kvreg::wire {

// Deeper than any RouterEvent (6 levels); bounds the parsers' recursion.
static constexpr unsigned kMaxDepth = 32;

bool Tree::is(const Node &n, const char *lit) const noexcept {
    size_t l = std::strlen(lit);
    return n.kind == Node::Str && n.len == l && text.compare(n.str, l, lit) == 0;
}

const Node *Tree::find(const Node &map, const char *name) const noexcept {
    if (map.kind != Node::Map)
        return nullptr;
    for (size_t k = 0; k < map.count; k++)
        if (is(kid(map, 2 * k), name))
            return &kid(map, 2 * k + 1);
    return nullptr;
}

namespace {

// ---- JSON ---------------------------------------------------------------------------------

class JsonParser {
public:
    JsonParser(const uint8_t *p, size_t len, Tree &t) : p_(p), len_(len), t_(t) {}

    bool document(size_t &root) {
        if (!value(root, 0))
            return false;
        ws();
        if (pos_ != len_)
            return fail(pos_, "bytes after the end of the JSON document");
        return true;
    }
    size_t err_off = 0;
    const char *err = nullptr;

private:
    bool fail(size_t off, const char *why) {
        if (!err)
            err = why, err_off = off > len_ ? len_ : off;
        return false;
    }
    void ws() {
        while (pos_ < len_ && (p_[pos_] == ' ' || p_[pos_] == '\t' || p_[pos_] == '\n' ||
                               p_[pos_] == '\r'))
            pos_++;
    }
    bool literal(const char *lit) {
        size_t n = std::strlen(lit);
        if (len_ - pos_ < n || std::memcmp(p_ + pos_, lit, n) != 0)
            return fail(pos_, "not a JSON value");
        pos_ += n;
        return true;
    }
    size_t add(Node::Kind k, size_t off) {
        Node n{};
        n.kind = k, n.off = off;
        t_.nodes.push_back(n);
        return t_.nodes.size() - 1;
    }

    bool value(size_t &out, unsigned depth) {
        ws();
        if (pos_ >= len_)
            return fail(pos_, "truncated: a JSON value is missing at the end");
        size_t off = pos_;
        switch (p_[pos_]) {
        case 'n': out = add(Node::Nil, off); return literal("null");
        case 't': out = add(Node::Bool, off), t_.nodes[out].u = 1; return literal("true");
        case 'f': out = add(Node::Bool, off); return literal("false");
        case '"': out = add(Node::Str, off); return string(out);
        case '[': return container(out, depth, false);
        case '{': return container(out, depth, true);
        default: return number(out);
        }
    }

    bool container(size_t &out, unsigned depth, bool is_map) {
        size_t off = pos_++;
        if (depth >= kMaxDepth)
            return fail(off, "JSON nested too deeply");
        std::vector<size_t> kids;
        ws();
        char close = is_map ? '}' : ']';
        if (pos_ < len_ && p_[pos_] == close) {
            pos_++;
        } else {
            for (;;) {
                size_t v;
                if (is_map) {
                    ws();
                    if (pos_ >= len_ || p_[pos_] != '"')
                        return fail(pos_, "a JSON object key must be a string");
                    v = add(Node::Str, pos_);
                    if (!string(v))
                        return false;
                    kids.push_back(v);
                    ws();
                    if (pos_ >= len_ || p_[pos_] != ':')
                        return fail(pos_, "':' expected after a JSON object key");
                    pos_++;
                }
                if (!value(v, depth + 1))
                    return false;
                kids.push_back(v);
                ws();
                if (pos_ >= len_)
                    return fail(pos_, "truncated: an unterminated JSON array or object");
                if (p_[pos_] == ',') {
                    pos_++;
                    continue;
                }
                if (p_[pos_] == close) {
                    pos_++;
                    break;
                }
                return fail(pos_, "',' or the closing bracket expected");
            }
        }
        out = add(is_map ? Node::Map : Node::Array, off);
        Node &n = t_.nodes[out];
        n.first = t_.kids.size();
        n.count = is_map ? kids.size() / 2 : kids.size();
        t_.kids.insert(t_.kids.end(), kids.begin(), kids.end());
        return true;
    }

    static int hex(uint8_t c) {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
            return c - 'A' + 10;
        return -1;
    }
    void utf8(uint32_t cp) {
        std::string &s = t_.text;
        if (cp < 0x80) {
            s.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
            s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        } else {
            s.push_back(static_cast<char>(0xe0 | (cp >> 12)));
            s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
            s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        }
    }

    // A string at pos_ (the opening quote) into the text arena. Surrogate pairs are kept as
    // two 3-byte sequences: the decoder only compares strings with ASCII names.
    bool string(size_t node) {
        size_t start = t_.text.size();
        pos_++;
        for (;;) {
            if (pos_ >= len_)
                return fail(pos_, "truncated: an unterminated JSON string");
            uint8_t c = p_[pos_];
            if (c == '"') {
                pos_++;
                break;
            }
            if (c < 0x20)
                return fail(pos_, "a control character inside a JSON string");
            if (c != '\\') {
                t_.text.push_back(static_cast<char>(c));
                pos_++;
                continue;
            }
            if (len_ - pos_ < 2)
                return fail(pos_, "truncated: an escape at the end of the payload");
            uint8_t e = p_[pos_ + 1];
            const char *simple = "\"\\/bfnrt";
            const char *to = "\"\\/\b\f\n\r\t";
            const char *hit = e ? std::strchr(simple, e) : nullptr;
            if (hit) {
                t_.text.push_back(to[hit - simple]);
                pos_ += 2;
            } else if (e == 'u') {
                if (len_ - pos_ < 6)
                    return fail(pos_, "truncated: a \\u escape at the end of the payload");
                uint32_t cp = 0;
                for (size_t k = 2; k < 6; k++) {
                    int h = hex(p_[pos_ + k]);
                    if (h < 0)
                        return fail(pos_, "a bad \\u escape");
                    cp = cp << 4 | static_cast<uint32_t>(h);
                }
                utf8(cp);
                pos_ += 6;
            } else {
                return fail(pos_, "an unknown escape in a JSON string");
            }
        }
        Node &n = t_.nodes[node];
        n.str = start, n.len = t_.text.size() - start;
        return true;
    }

    bool number(size_t &out) {
        size_t off = pos_;
        bool neg = false;
        if (pos_ < len_ && p_[pos_] == '-')
            neg = true, pos_++;
        size_t digits = pos_;
        uint64_t v = 0;
        bool overflow = false;
        while (pos_ < len_ && p_[pos_] >= '0' && p_[pos_] <= '9') {
            unsigned d = p_[pos_] - '0';
            if (v > (UINT64_MAX - d) / 10)
                overflow = true;
            v = v * 10 + d;
            pos_++;
        }
        if (pos_ == digits)
            return fail(off, "not a JSON value");
        bool is_float = false;
        while (pos_ < len_ && (p_[pos_] == '.' || p_[pos_] == 'e' || p_[pos_] == 'E' ||
                               p_[pos_] == '+' || p_[pos_] == '-' ||
                               (p_[pos_] >= '0' && p_[pos_] <= '9')))
            is_float = true, pos_++;
        if (is_float) {
            std::string s(reinterpret_cast<const char *>(p_ + off), pos_ - off);
            char *end = nullptr;
            double d = std::strtod(s.c_str(), &end);
            if (end != s.c_str() + s.size())
                return fail(off, "a malformed JSON number");
            out = add(Node::Float, off);
            t_.nodes[out].f = d;
            return true;
        }
        if (overflow || (neg && v > static_cast<uint64_t>(INT64_MAX) + 1))
            return fail(off, "an integer out of the 64-bit range");
        if (neg && v != 0) {
            out = add(Node::Int, off);
            t_.nodes[out].i = static_cast<int64_t>(0 - v);
        } else {
            out = add(Node::Uint, off);
            t_.nodes[out].u = v;
        }
        return true;
    }

    const uint8_t *p_;
    size_t len_;
    size_t pos_ = 0;
    Tree &t_;
};

// ---- msgpack ------------------------------------------------------------------------------

class MpTreeParser {
public:
    MpTreeParser(MpReader &r, Tree &t) : r_(r), t_(t) {}

    bool value(size_t &out, unsigned depth) {
        MpHead h;
        if (!r_.head(h))
            return false;
        Node n{};
        n.off = h.off;
        switch (h.kind) {
        case MpKind::Nil: n.kind = Node::Nil; break;
        case MpKind::Bool: n.kind = Node::Bool, n.u = h.u; break;
        case MpKind::Uint: n.kind = Node::Uint, n.u = h.u; break;
        case MpKind::Int: n.kind = Node::Int, n.i = h.i; break;
        case MpKind::Float: n.kind = Node::Float, n.f = h.f; break;
        case MpKind::Str:
            n.kind = Node::Str, n.str = t_.text.size(), n.len = h.len;
            t_.text.append(h.data, h.len);
            break;
        case MpKind::Array:
        case MpKind::Map: {
            if (depth >= kMaxDepth)
                return r_.fail(h.off, "msgpack nested too deeply");
            size_t total = h.kind == MpKind::Map ? 2 * h.count : h.count;
            std::vector<size_t> kids(total);
            for (size_t k = 0; k < total; k++)
                if (!value(kids[k], depth + 1))
                    return false;
            n.kind = h.kind == MpKind::Map ? Node::Map : Node::Array;
            n.first = t_.kids.size(), n.count = h.count;
            t_.kids.insert(t_.kids.end(), kids.begin(), kids.end());
            break;
        }
        default: n.kind = Node::Other; break; // bin, ext: no Dynamo field has them
        }
        t_.nodes.push_back(n);
        out = t_.nodes.size() - 1;
        return true;
    }

private:
    MpReader &r_;
    Tree &t_;
};

} // namespace

bool parse_json(const uint8_t *p, size_t len, Tree &t, size_t &root, size_t &err_off,
                const char *&err) {
    t.clear();
    JsonParser j(p, len, t);
    if (j.document(root))
        return true;
    err_off = j.err_off, err = j.err;
    return false;
}

bool parse_msgpack(const uint8_t *p, size_t len, Tree &t, size_t &root, size_t &err_off,
                   const char *&err) {
    t.clear();
    MpReader r(p, len);
    MpTreeParser m(r, t);
    if (m.value(root, 0)) {
        if (r.at_end())
            return true;
        r.fail(r.pos(), "bytes after the end of the payload");
    }
    err_off = r.error_offset(), err = r.error();
    return false;
}

} // namespace kvreg::wire
