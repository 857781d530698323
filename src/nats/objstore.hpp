// A NATS object-store bucket written and read over plain JetStream calls (libnats 3.4 has no
// object-store API), in the object store's own layout, so that any NATS client's object-store
// API reads what this writes:
//   stream  OBJ_<bucket>, subjects $O.<bucket>.C.> and $O.<bucket>.M.>, rollups allowed;
//   chunks  one message each on $O.<bucket>.C.<nuid> (nuid: fresh per object version);
//   meta    JSON object info on $O.<bucket>.M.<base64url(name)>, published with the header
//           Nats-Rollup: sub so only the newest version of a name stays: name, bucket, nuid,
//           size, chunks, mtime, digest "SHA-256=<base64url>", options.max_chunk_size, and
//           our own metadata {"kvreg-stream-seq": "<n>"}.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nats/nats.h>

#include "nats/conn.hpp"

namespace kvreg::nats {

struct ObjectInfo {
    std::string nuid, digest;
    uint64_t size = 0, chunks = 0, stream_seq = 0;
    bool has_seq = false;
};

class ObjectStore {
  public:
    // nc: js's connection (subscriptions are dropped through it: see Conn::stop).
    ObjectStore(natsConnection *nc, jsCtx *js, std::string bucket) : nc_(nc), js_(js), bucket_(std::move(bucket)) {}
    // The bucket's stream exists or was created. false: the server refused or is away.
    bool ensure() noexcept;
    // The newest info of name: KVREG_OK, KVREG_ENOENT (none), KVREG_EPROTO (server away) or
    // KVREG_EBADMSG-like KVREG_EINVAL (metadata that does not parse; why says so).
    int info(const std::string &name, ObjectInfo &out, std::string &why);
    // The same in two steps, for several names at once (ApiInbox::request_all): the request
    // for name's newest info, and what its answer says (empty: no answer).
    ApiRequest info_request(const std::string &name) const;
    static int info_from(const std::string &answer, ObjectInfo &out, std::string &why);
    // Store data under name in chunks of at most chunk bytes: chunks first, then the metadata
    // (an object is only visible once its metadata is stored), then the previous version's
    // chunks are purged. KVREG_EPROTO when the server refused any of it.
    int put(const std::string &name, const std::string &data, size_t chunk, uint64_t stream_seq);
    // Read the object info names, handing each chunk to sink(data, len) as it arrives (the
    // data is valid during the call only), then check its size and SHA-256 digest. The sink
    // says after each chunk what the content needs (SinkVerdict): the digest (kDigest), or
    // nothing more, because the sink checks it whole itself (a kvreg snapshot of version 2):
    // from then on the digest is neither computed nor compared (kSelfChecked), and the read
    // stops at once, returning KVREG_OK, when the sink has already refused it (kRefused: its
    // own result stands). So a sink may leave kDigest only once it has checked everything so
    // far and will check the rest (and fail its own result where it does not).
    // KVREG_OK; KVREG_EINVAL with why when a chunk is missing or the content does not match
    // (sink has had some or all of it: the caller undoes what it did with it); KVREG_EPROTO:
    // server away.
    enum class SinkVerdict { kDigest, kSelfChecked, kRefused };
    using ChunkSink = std::function<SinkVerdict(const char *data, size_t len)>;
    // max_size: what the bucket holds (its stream's bytes); an info that claims more is
    // refused before the sink has anything (chunks of one byte each pass the check of the
    // first chunk against the count, and the sink sizes things by the claim).
    int get(const ObjectInfo &info, const ChunkSink &sink, std::string &why, uint64_t max_size = UINT64_MAX);

    // Purge every chunk subject that no object's metadata names and whose newest chunk is
    // older than older_than_ms (by the server's clock). Returns the subjects purged, or -1
    // when the server did not answer (nothing is purged that a current object names).
    int64_t sweep_orphans(uint64_t older_than_ms);

    std::string stream() const { return "OBJ_" + bucket_; }
    std::string meta_subject(const std::string &name) const;
    std::string chunk_subject(const std::string &nuid) const { return "$O." + bucket_ + ".C." + nuid; }

  private:
    uint64_t stored_count(const std::string &subject); // messages on it; UINT64_MAX: no answer
    // The subjects under filter that hold messages, with their counts (one stream-info
    // request); false: no answer.
    using SubjectCounts = std::vector<std::pair<std::string, uint64_t>>;
    bool subjects(const std::string &filter, SubjectCounts &out);
    natsConnection *nc_;
    jsCtx *js_;
    std::string bucket_;
};

std::string base64url(const uint8_t *p, size_t n); // with '=' padding, as the object store's
std::string sha256_digest(const std::string &data); // "SHA-256=<base64url>"

} // namespace kvreg::nats
