/*
 * kvreg-events decode: read payload files (one payload per file: the third ZeroMQ frame of a
 * vLLM / SGLang publisher, or a Dynamo RouterEvent JSON / msgpack payload) and print each
 * decoded event as one JSON object per line. A rejected file gets one line on stderr naming
 * the file and the byte offset of the problem; the other files are still decoded.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvreg_wire.h>

#include "commands.h"
#include "stream_file.h"

static void decode_usage(FILE *f)
{
    fprintf(f,
            "usage: kvreg-events decode [--format FORMAT] [--all-fields] FILE...\n"
            "\n"
            "Decode one payload per FILE ('-' reads stdin) and print one JSON object per event:\n"
            "  {\"type\", \"block_hashes\", \"parent_block_hash\", \"token_ids\", \"block_size\",\n"
            "   \"medium\", \"lora_name\", \"group_idx\", \"dp_rank\", \"ts\"}\n"
            "(Dynamo formats add \"worker_id\", \"event_id\" and \"tokens_hashes\"). Hashes are\n"
            "exact unsigned 64-bit integers; absent fields are null (\"medium\" too: it is\n"
            "printed only when the payload has one). With --all-fields these keys appear too,\n"
            "each only when the payload has it: \"tag\" (the wire type name when it differs from \"type\", e.g.\n"
            "TierBlocksCleared), \"lora_id\", \"cache_salt\", \"kv_cache_spec_kind\",\n"
            "\"kv_cache_spec_sliding_window\", \"extra_keys_msgpack\" (hex), \"locality\",\n"
            "\"ownership\", \"session_id\"; EAGLE bigram token_ids print as pairs [[a,b],...];\n"
            "Dynamo formats: \"start_position\", \"residency_domain\", \"state_source_bytes\"\n"
            "(hex), \"mm_extra_info\" (per block: null or {\"mm_objects\":[{\"mm_hash\",\n"
            "\"offsets\":[[start,end],...]}]}).\n"
            "\n"
            "FORMAT:\n"
            "  vllm            vLLM KVEventBatch, any generation (map or positional events),\n"
            "                  also SGLang's (default)\n"
            "  sglang          the same decoder, named for SGLang publishers\n"
            "  dynamo-json     Dynamo RouterEvent JSON (an array of them, or one)\n"
            "  dynamo-msgpack  Dynamo RouterEvent msgpack with field names\n"
            "  dynamo          dynamo-json if the file starts with '[' or '{', else msgpack\n"
            "\n"
            "A stream file (what kvreg-replay writes with wire-out, magic KVRGSTR1) is decoded record by\n"
            "record, each as a single payload. A payload (or record) longer than 16 MiB is\n"
            "rejected as too large after 16 MiB + 1 byte of it is read. Strings print as UTF-8:\n"
            "an invalid sequence as U+FFFD, control characters as \\uXXXX.\n"
            "\n"
            "Exit status: 0 every file decoded, 1 some file was rejected or unreadable (one\n"
            "line each on stderr, with the byte offset and the reason), 2 bad usage.\n");
}

#define FORMAT_DYNAMO_AUTO 0u

static int parse_format(const char *s, uint32_t *format)
{
    static const struct {
        const char *name;
        uint32_t format;
    } names[] = {{"vllm", KVREG_WIRE_VLLM},
                 {"sglang", KVREG_WIRE_SGLANG},
                 {"dynamo-json", KVREG_WIRE_DYNAMO_JSON},
                 {"dynamo-msgpack", KVREG_WIRE_DYNAMO_MSGPACK},
                 {"dynamo", FORMAT_DYNAMO_AUTO}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *format = names[i].format;
            return 0;
        }
    return -1;
}

/* JSON text of the bytes s[0..len): the characters they are as UTF-8. Valid UTF-8 passes
 * through as is; each invalid sequence (a maximal subpart, as Unicode and Python's
 * errors="replace" count them: a byte that cannot start a sequence, or a lead byte with the
 * continuation bytes that were valid after it) becomes U+FFFD, written \ufffd; quotes and
 * backslashes get a backslash; control characters (C0 and C1), DEL, NUL, U+2028 and U+2029
 * are written \uXXXX (an embedded NUL is a character like any other when len says it is
 * there). Quoted: with the quotes. */
void events_json_write(FILE *f, const char *s, size_t len, int quoted)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    if (quoted)
        putc('"', f);
    while (p < end) {
        const unsigned char c = *p;
        if (c < 0x80) {
            if (c == '"' || c == '\\')
                fprintf(f, "\\%c", c);
            else if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\u%04x", c);
            else
                putc(c, f);
            p++;
            continue;
        }
        size_t need = 0, i = 1;
        unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range (Unicode table 3-7) */
        if (c >= 0xC2 && c <= 0xDF)
            need = 2;
        else if (c >= 0xE0 && c <= 0xEF)
            need = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4)
            need = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        for (; i < need && p + i < end; i++) {
            if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xBF))
                break;
        }
        if (need && i == need) {
            /* C1 controls (U+0080..U+009F: NEL among them) and U+2028 / U+2029 are valid JSON
             * as they are, but line breaks to some readers (Python's splitlines, older
             * JavaScript): escaped, so that one event stays one line whoever splits it */
            if (c == 0xC2 && p[1] < 0xA0)
                fprintf(f, "\\u%04x", p[1]);
            else if (c == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9))
                fprintf(f, "\\u%04x", 0x2000 + (p[2] & 0x3F));
            else
                fwrite(p, 1, need, f);
        } else {
            fputs("\\ufffd", f);
        }
        p += i;
    }
    if (quoted)
        putc('"', f);
}

static void print_string(const char *s)
{
    events_json_write(stdout, s, strlen(s), 1);
}

static void print_u64s(const char *key, const uint64_t *v, size_t n)
{
    printf(",\"%s\":[", key);
    for (size_t i = 0; i < n; i++)
        printf("%s%llu", i ? "," : "", (unsigned long long)v[i]);
    putchar(']');
}

static const char *type_name(uint32_t type)
{
    switch (type) {
    case KVREG_WIRE_STORED: return "BlockStored";
    case KVREG_WIRE_REMOVED: return "BlockRemoved";
    default: return "AllBlocksCleared";
    }
}

/* The medium as vLLM names it when the library knows it, else as it was on the wire; null
 * when the payload has none (the decoder's KVREG_MEDIUM_GPU default is not printed as GPU). */
static void print_medium(const kvreg_wire_event *e)
{
    static const char *const names[KVREG_MEDIUM_COUNT] = {"GPU", "CPU", "STORAGE", "EXTERNAL"};
    if (!e->medium_name)
        fputs("null", stdout);
    else if (e->medium < KVREG_MEDIUM_COUNT)
        print_string(names[e->medium]);
    else
        print_string(e->medium_name);
}

/* ,"key":"value" / ,"key":null when the field is in the payload; nothing when absent. */
static void print_opt_string(const char *key, const char *v, uint32_t form)
{
    if (form == KVREG_WIRE_FIELD_ABSENT)
        return;
    printf(",\"%s\":", key);
    if (form == KVREG_WIRE_FIELD_SET && v)
        print_string(v);
    else
        fputs("null", stdout);
}

static void print_opt_int(const char *key, int64_t v, uint32_t form)
{
    if (form == KVREG_WIRE_FIELD_SET)
        printf(",\"%s\":%lld", key, (long long)v);
    else if (form == KVREG_WIRE_FIELD_NIL)
        printf(",\"%s\":null", key);
}

/* Dynamo's start_position, residency_domain, state_source (hex of its bytes as on the wire)
 * and mm_extra_info (one entry per block: null when absent or null, else its objects), each
 * only when the payload has it. */
static void print_dynamo_ext(const kvreg_wire_event *e, const kvreg_wire_event_ext *x)
{
    if (x->shape != KVREG_WIRE_SHAPE_DYNAMO)
        return;
    print_opt_int("start_position", x->start_position, x->start_position_form);
    print_opt_string("residency_domain", x->residency_domain, x->residency_domain_form);
    if (x->state_source_form == KVREG_WIRE_FIELD_NIL)
        fputs(",\"state_source_bytes\":null", stdout);
    else if (x->state_source_form == KVREG_WIRE_FIELD_SET) {
        fputs(",\"state_source_bytes\":\"", stdout);
        for (size_t i = 0; i < x->state_source_len; i++)
            printf("%02x", x->state_source[i]);
        putchar('"');
    }
    int any = 0;
    for (size_t i = 0; x->mm_extra_info_forms && i < e->n_block_hashes; i++)
        any |= x->mm_extra_info_forms[i] != KVREG_WIRE_FIELD_ABSENT;
    if (!any)
        return;
    fputs(",\"mm_extra_info\":[", stdout);
    size_t o = 0;
    for (size_t i = 0; i < e->n_block_hashes; i++) {
        if (i)
            putchar(',');
        if (x->mm_extra_info_forms[i] != KVREG_WIRE_FIELD_SET) {
            fputs("null", stdout);
            continue;
        }
        fputs("{\"mm_objects\":[", stdout);
        for (int first = 1; o < x->n_mm_objects && x->mm_objects[o].block == i; o++, first = 0) {
            const kvreg_wire_mm_object *m = &x->mm_objects[o];
            printf("%s{\"mm_hash\":%llu,\"offsets\":[", first ? "" : ",",
                   (unsigned long long)m->mm_hash);
            for (uint32_t j = 0; j < m->n_offsets; j++)
                printf("%s[%llu,%llu]", j ? "," : "",
                       (unsigned long long)x->mm_offsets[2 * (m->first_offset + j)],
                       (unsigned long long)x->mm_offsets[2 * (m->first_offset + j) + 1]);
            fputs("]}", stdout);
        }
        fputs("]}", stdout);
    }
    putchar(']');
}

/* The fields only kvreg_wire_event_ext carries, each only when the payload has it. */
static void print_ext(const kvreg_wire_event *e, const kvreg_wire_event_ext *x)
{
    if (x->tag && strcmp(x->tag, type_name(e->type)) != 0) {
        fputs(",\"tag\":", stdout);
        print_string(x->tag);
    }
    print_opt_int("lora_id", x->lora_id, x->lora_id_form);
    print_opt_string("cache_salt", x->cache_salt, x->cache_salt_form);
    print_opt_string("kv_cache_spec_kind", x->kv_cache_spec_kind, x->kv_cache_spec_kind_form);
    print_opt_int("kv_cache_spec_sliding_window", x->kv_cache_spec_sliding_window,
                  x->sliding_window_form);
    if (x->extra_keys_form != KVREG_WIRE_FIELD_ABSENT) {
        fputs(",\"extra_keys_msgpack\":\"", stdout);
        for (size_t i = 0; i < x->extra_keys_len; i++)
            printf("%02x", x->extra_keys[i]);
        putchar('"');
    }
    print_opt_string("locality", x->locality, x->locality_form);
    print_opt_string("ownership", x->ownership, x->ownership_form);
    print_opt_string("session_id", x->session_id, x->session_id_form);
    print_dynamo_ext(e, x);
}

static void events_print_event_ext(const kvreg_wire_event *e, const kvreg_wire_event_ext *x,
                                   int dynamo, const char *head);

void events_print_event(const kvreg_wire_event *e, int dynamo, const char *head)
{
    events_print_event_ext(e, NULL, dynamo, head);
}

/* One event as a JSON line; x (may be NULL) adds the extended fields. */
static void events_print_event_ext(const kvreg_wire_event *e, const kvreg_wire_event_ext *x,
                                   int dynamo, const char *head)
{
    printf("{%s\"type\":\"%s\"", head ? head : "", type_name(e->type));
    print_u64s("block_hashes", e->block_hashes, e->n_block_hashes);
    if (e->has_parent)
        printf(",\"parent_block_hash\":%llu", (unsigned long long)e->parent_block_hash);
    else
        fputs(",\"parent_block_hash\":null", stdout);
    fputs(",\"token_ids\":[", stdout);
    if (x && x->token_pairs) {
        for (size_t i = 0; i + 1 < x->n_pair_token_ids; i += 2)
            printf("%s[%lu,%lu]", i ? "," : "", (unsigned long)x->pair_token_ids[i],
                   (unsigned long)x->pair_token_ids[i + 1]);
    }
    for (size_t i = 0; i < e->n_token_ids; i++)
        printf("%s%lu", i ? "," : "", (unsigned long)e->token_ids[i]);
    putchar(']');
    if (e->block_size)
        printf(",\"block_size\":%lu", (unsigned long)e->block_size);
    else
        fputs(",\"block_size\":null", stdout);
    fputs(",\"medium\":", stdout);
    print_medium(e);
    fputs(",\"lora_name\":", stdout);
    if (e->lora_name)
        print_string(e->lora_name);
    else
        fputs("null", stdout);
    if (e->has_group_idx)
        printf(",\"group_idx\":%lld", (long long)e->group_idx);
    else
        fputs(",\"group_idx\":null", stdout);
    if (e->has_dp_rank)
        printf(",\"dp_rank\":%lld", (long long)e->dp_rank);
    else
        fputs(",\"dp_rank\":null", stdout);
    if (dynamo)
        fputs(",\"ts\":null", stdout); /* RouterEvents carry no timestamp */
    else if (isfinite(e->ts))
        printf(",\"ts\":%.17g", e->ts);
    else
        fputs(",\"ts\":null", stdout);
    if (dynamo) {
        printf(",\"worker_id\":%llu,\"event_id\":%llu", (unsigned long long)e->worker_id,
               (unsigned long long)e->event_id);
        if (e->tokens_hashes)
            print_u64s("tokens_hashes", e->tokens_hashes, e->n_block_hashes);
    }
    if (x)
        print_ext(e, x);
    fputs("}\n", stdout);
}

static uint32_t resolve_format(uint32_t format, const uint8_t *p, size_t len)
{
    if (format != FORMAT_DYNAMO_AUTO)
        return format;
    size_t i = 0;
    while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return i < len && (p[i] == '[' || p[i] == '{') ? KVREG_WIRE_DYNAMO_JSON
                                                   : KVREG_WIRE_DYNAMO_MSGPACK;
}

void events_print_events(const kvreg_wire_decoder *dec, const kvreg_wire_event *ev, size_t n,
                         uint32_t format, int all)
{
    const int dynamo = format == KVREG_WIRE_DYNAMO_JSON || format == KVREG_WIRE_DYNAMO_MSGPACK;
    for (size_t i = 0; i < n; i++) {
        kvreg_wire_event_ext x;
        x.struct_size = sizeof x;
        if (all && kvreg_wire_decoder_event_ext(dec, i, &x) == KVREG_OK)
            events_print_event_ext(&ev[i], &x, dynamo, NULL);
        else
            events_print_event(&ev[i], dynamo, NULL);
    }
}

/* Decode one file; 0 or EVENTS_EXIT_REJECTED (message printed). all: --all-fields.
 * A single payload is read up to the decoder's payload limit and one byte more (a longer one
 * is then rejected by the decoder as too large, without the rest being read); a stream file
 * one record at a time (stream_file.c). */
static int decode_file(const char *path, uint32_t format, int all)
{
    const size_t cap = (size_t)KVREG_WIRE_DEC_DEFAULT_MAX_PAYLOAD + 1;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kvreg-events: %s: cannot read\n", path);
        return EVENTS_EXIT_REJECTED;
    }
    size_t size = 4096, len;
    uint8_t *p = malloc(size);
    if (!p) {
        fprintf(stderr, "kvreg-events: %s: out of memory\n", path);
        if (f != stdin)
            fclose(f);
        return EVENTS_EXIT_REJECTED;
    }
    len = stream_read_up_to(f, p, STREAM_FILE_MAGIC_LEN);
    if (!ferror(f) && stream_file_is(p, len)) { /* kvreg-replay --wire-out: many payloads */
        free(p);
        int st = stream_file_decode(path, f, format, all, resolve_format);
        if (f != stdin)
            fclose(f);
        return st;
    }
    while (!ferror(f) && !feof(f) && len < cap) {
        if (len == size) {
            const size_t bigger = size > cap / 2 ? cap : size * 2;
            uint8_t *q = realloc(p, bigger);
            if (!q) {
                fprintf(stderr, "kvreg-events: %s: out of memory\n", path);
                free(p);
                if (f != stdin)
                    fclose(f);
                return EVENTS_EXIT_REJECTED;
            }
            p = q, size = bigger;
        }
        len += stream_read_up_to(f, p + len, size - len);
    }
    const int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (bad) {
        fprintf(stderr, "kvreg-events: %s: cannot read\n", path);
        free(p);
        return EVENTS_EXIT_REJECTED;
    }
    format = resolve_format(format, p, len);
    kvreg_wire_decoder *dec = NULL;
    int rc = kvreg_wire_decoder_new(&dec, format);
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-events: %s: %s\n", path, kvreg_strerror(rc));
        free(p);
        return EVENTS_EXIT_REJECTED;
    }
    const kvreg_wire_event *ev;
    size_t n = 0, off = 0;
    rc = kvreg_wire_decode(dec, p, len, &ev, &n, &off);
    int status = EVENTS_EXIT_OK;
    if (rc == KVREG_OK) {
        events_print_events(dec, ev, n, format, all);
    } else if (rc == KVREG_EPROTO) {
        fprintf(stderr, "kvreg-events: %s: rejected at byte %zu: %s\n", path, off,
                kvreg_wire_decoder_error(dec));
        status = EVENTS_EXIT_REJECTED;
    } else {
        fprintf(stderr, "kvreg-events: %s: %s\n", path, kvreg_strerror(rc));
        status = EVENTS_EXIT_REJECTED;
    }
    kvreg_wire_decoder_free(dec);
    free(p);
    return status;
}

int events_decode(int argc, char **argv)
{
    uint32_t format = KVREG_WIRE_VLLM;
    int all = 0;
    int first = 1;
    for (; first < argc; first++) {
        const char *a = argv[first];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            decode_usage(stdout);
            return EVENTS_EXIT_OK;
        }
        if (strcmp(a, "--format") == 0 || strncmp(a, "--format=", 9) == 0) {
            const char *v = a[8] == '=' ? a + 9 : (first + 1 < argc ? argv[++first] : NULL);
            if (!v || parse_format(v, &format) != 0) {
                fprintf(stderr, "kvreg-events decode: --format needs vllm, sglang, dynamo, "
                                "dynamo-json or dynamo-msgpack\n");
                return EVENTS_EXIT_USAGE;
            }
        } else if (strcmp(a, "--all-fields") == 0) {
            all = 1;
        } else if (strcmp(a, "--") == 0) {
            first++;
            break;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "kvreg-events decode: unknown option '%s'\n", a);
            decode_usage(stderr);
            return EVENTS_EXIT_USAGE;
        } else {
            break;
        }
    }
    if (first >= argc) {
        fprintf(stderr, "kvreg-events decode: no FILE given\n");
        decode_usage(stderr);
        return EVENTS_EXIT_USAGE;
    }
    int status = EVENTS_EXIT_OK;
    for (int i = first; i < argc; i++) {
        if (decode_file(argv[i], format, all) != EVENTS_EXIT_OK)
            status = EVENTS_EXIT_REJECTED;
    }
    fflush(stdout);
    return status;
}
