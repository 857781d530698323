// Several JetStream API requests at once (src/nats/conn.hpp, ApiInbox), as a restore's start
// asks for the stream and every snapshot slot's metadata in one round trip, against a real
// nats-server: answers are matched to their requests by subject whatever their order; a request
// nobody answers in time gets an empty answer, and its late answer is not taken for a later
// call's; a request to a subject no one serves ends at once (the server's no-responders status).
// Then ObjectStore::info_from on message-get answers written here by hand (metadata in standard
// base64, each padding; the server's error answers). Internal: links the static library.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <mutex>
#include <string>
#include <vector>

#include <nats/nats.h>

#include "kvreg.h"
#include "nats/conn.hpp"
#include "nats/objstore.hpp"

extern "C" {
#include "nats_fixture.h"
#include <cmocka.h> // last: its fail() macro; C linkage (cmocka 1.1's header does not say)
}

namespace {

using kvreg::nats::ApiInbox;
using kvreg::nats::ApiRequest;
using kvreg::nats::ObjectInfo;
using kvreg::nats::ObjectStore;

nats_server server;

// A responder on its own connection: "t.echo" answers with the request's body at once;
// "t.rev" holds three requests and answers them last first; "t.hold" keeps the reply subject
// and never answers.
struct Responder {
    natsConnection *nc = nullptr;
    natsSubscription *subs[3] = {};
    std::mutex mu;
    std::vector<std::pair<std::string, std::string>> rev; // (reply, body)
    std::string held_reply;
};

std::string body_of(natsMsg *m) {
    return std::string(natsMsg_GetData(m) ? natsMsg_GetData(m) : "", static_cast<size_t>(natsMsg_GetDataLength(m)));
}

void on_echo(natsConnection *nc, natsSubscription *, natsMsg *m, void *) {
    const std::string b = body_of(m);
    natsConnection_Publish(nc, natsMsg_GetReply(m), b.data(), static_cast<int>(b.size()));
    natsConnection_Flush(nc);
    natsMsg_Destroy(m);
}

void on_rev(natsConnection *nc, natsSubscription *, natsMsg *m, void *closure) {
    auto *r = static_cast<Responder *>(closure);
    std::lock_guard<std::mutex> g(r->mu);
    r->rev.emplace_back(natsMsg_GetReply(m), body_of(m));
    natsMsg_Destroy(m);
    if (r->rev.size() < 3) return;
    for (size_t i = r->rev.size(); i-- > 0;)
        natsConnection_Publish(nc, r->rev[i].first.c_str(), r->rev[i].second.data(), static_cast<int>(r->rev[i].second.size()));
    natsConnection_Flush(nc);
    r->rev.clear();
}

void on_hold(natsConnection *, natsSubscription *, natsMsg *m, void *closure) {
    auto *r = static_cast<Responder *>(closure);
    std::lock_guard<std::mutex> g(r->mu);
    r->held_reply = natsMsg_GetReply(m);
    natsMsg_Destroy(m);
}

void responder_open(Responder &r) {
    assert_int_equal(natsConnection_ConnectTo(&r.nc, server.url), NATS_OK);
    assert_int_equal(natsConnection_Subscribe(&r.subs[0], r.nc, "t.echo", on_echo, &r), NATS_OK);
    assert_int_equal(natsConnection_Subscribe(&r.subs[1], r.nc, "t.rev", on_rev, &r), NATS_OK);
    assert_int_equal(natsConnection_Subscribe(&r.subs[2], r.nc, "t.hold", on_hold, &r), NATS_OK);
    assert_int_equal(natsConnection_Flush(r.nc), NATS_OK); // the server knows the subscriptions
}

void responder_close(Responder &r) {
    natsConnection_Close(r.nc); // its callbacks are over before the subscriptions go
    for (auto *s : r.subs) natsSubscription_Destroy(s);
    natsConnection_Destroy(r.nc);
}

struct Client {
    natsConnection *nc = nullptr;
    ApiInbox api;
    Client() {
        assert_int_equal(natsConnection_ConnectTo(&nc, server.url), NATS_OK);
        assert_true(api.open(nc, "_INBOX.apitest"));
    }
    ~Client() {
        natsConnection_Close(nc);
        api.close();
        natsConnection_Destroy(nc);
    }
};

void test_answers_matched_out_of_order(void **) {
    Responder r;
    responder_open(r);
    {
        Client c;
        std::vector<std::string> answers;
        // The three answers come last first, then another call's comes in order.
        assert_true(c.api.request_all({{"t.rev", "a"}, {"t.rev", "b"}, {"t.rev", "c"}}, answers, 5000));
        assert_int_equal(answers.size(), 3);
        assert_string_equal(answers[0].c_str(), "a");
        assert_string_equal(answers[1].c_str(), "b");
        assert_string_equal(answers[2].c_str(), "c");
        assert_true(c.api.request_all({{"t.echo", "x"}, {"t.echo", "y"}}, answers, 5000));
        assert_int_equal(answers.size(), 2);
        assert_string_equal(answers[0].c_str(), "x");
        assert_string_equal(answers[1].c_str(), "y");
    }
    responder_close(r);
}

void test_late_answer_not_taken(void **) {
    Responder r;
    responder_open(r);
    {
        Client c;
        std::vector<std::string> answers;
        const int64_t t0 = nats_now_ms();
        assert_true(c.api.request_all({{"t.hold", "q"}, {"t.echo", "now"}}, answers, 300));
        const int64_t took = nats_now_ms() - t0;
        assert_true(took >= 290 && took < 3000); // waited its timeout for the held one, no more
        assert_true(answers[0].empty());
        assert_string_equal(answers[1].c_str(), "now");
        // The held request's answer comes now, before the next call's: not taken for it.
        std::string held;
        {
            std::lock_guard<std::mutex> g(r.mu);
            held = r.held_reply;
        }
        assert_false(held.empty());
        assert_int_equal(natsConnection_PublishString(r.nc, held.c_str(), "late"), NATS_OK);
        assert_int_equal(natsConnection_Flush(r.nc), NATS_OK);
        assert_true(c.api.request_all({{"t.echo", "next"}}, answers, 5000));
        assert_int_equal(answers.size(), 1);
        assert_string_equal(answers[0].c_str(), "next");
    }
    responder_close(r);
}

void test_no_responders_ends_at_once(void **) {
    Client c;
    std::vector<std::string> answers;
    const int64_t t0 = nats_now_ms();
    assert_true(c.api.request_all({{"t.nobody", "?"}}, answers, 4000));
    assert_true(nats_now_ms() - t0 < 2000); // the server's 503 status, not the timeout
    assert_int_equal(answers.size(), 1);
    assert_true(answers[0].empty());
}

void test_closed_inbox_sends_nothing(void **) {
    ApiInbox api; // never opened
    std::vector<std::string> answers{"stale"};
    assert_false(api.request_all({{"t.echo", "x"}}, answers, 100));
    assert_int_equal(answers.size(), 1);
    assert_true(answers[0].empty());
}

std::string get_answer(const std::string &data_b64) {
    return R"({"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"$O.B.M.x","seq":9,)"
           R"("hdrs":"TkFUUy8xLjANCk5hdHMtUm9sbHVwOiBzdWINCg0K","data":")" +
           data_b64 + R"(","time":"2026-12-07T00:00:00Z"}})";
}

void test_info_from(void **) {
    ObjectInfo info;
    std::string why;
    // No padding (a 105-byte JSON), with the snapshot's stream sequence.
    assert_int_equal(ObjectStore::info_from(get_answer("eyJuYW1lIjoicy4wIiwibnVpZCI6IkFCQyIsInNpemUiOjEwLCJjaHVua3MiOjEsImRpZ2VzdCI6IlNIQS0yNTY9eCIsIm1ldGFkYXRhIjp7Imt2cmVnLXN0cmVhbS1zZXEiOiI3In19"), info, why),
                     KVREG_OK);
    assert_string_equal(info.nuid.c_str(), "ABC");
    assert_int_equal(info.size, 10);
    assert_int_equal(info.chunks, 1);
    assert_string_equal(info.digest.c_str(), "SHA-256=x");
    assert_true(info.has_seq);
    assert_int_equal(info.stream_seq, 7);
    // Two '=' and one '=' of padding; no stream sequence.
    assert_int_equal(ObjectStore::info_from(get_answer("eyJudWlkIjoiUTEiLCJzaXplIjozLCJjaHVua3MiOjEsImRpZ2VzdCI6ImQifQ=="), info, why),
                     KVREG_OK);
    assert_string_equal(info.nuid.c_str(), "Q1");
    assert_false(info.has_seq);
    assert_int_equal(ObjectStore::info_from(get_answer("eyJudWlkIjoiUTEyIiwic2l6ZSI6MywiY2h1bmtzIjoxLCJkaWdlc3QiOiJkIn0="), info, why),
                     KVREG_OK);
    assert_string_equal(info.nuid.c_str(), "Q12");
    assert_int_equal(info.size, 3);
    // Not base64 (a character outside it; a length not a multiple of 4): the metadata is bad.
    assert_int_equal(ObjectStore::info_from(get_answer("eyJud!lkIjoiUTEiLCJzaXplIjozLCJjaHVua3MiOjEsImRpZ2VzdCI6ImQifQ=="), info, why),
                     KVREG_EINVAL);
    assert_int_equal(ObjectStore::info_from(get_answer("eyJ"), info, why), KVREG_EINVAL);
    // Nothing stored under the name, or no bucket: none. Another error, or no answer: the
    // server is away (nothing known about the slot).
    assert_int_equal(ObjectStore::info_from(R"({"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":404,"err_code":10037,"description":"no message found"}})", info, why),
                     KVREG_ENOENT);
    assert_int_equal(ObjectStore::info_from(R"({"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}})", info, why),
                     KVREG_EPROTO);
    assert_int_equal(ObjectStore::info_from("", info, why), KVREG_EPROTO);
    assert_int_equal(ObjectStore::info_from(R"({"type":"io.nats.jetstream.api.v1.stream_info_response","config":{}})", info, why),
                     KVREG_EPROTO); // an answer of another kind
    // Members of nested objects do not stand in for the object's own, even when they come
    // first and a string inside holds an escaped quote and braces:
    // {"name":"s.0","metadata":{"nuid":"Z","size":"99","kvreg-stream-seq":"7"},
    //  "headers":{"Nats-Note":["x\"}{"]},"nuid":"ABC","size":10,"chunks":1,"digest":"SHA-256=x"}
    assert_int_equal(ObjectStore::info_from(get_answer("eyJuYW1lIjoicy4wIiwibWV0YWRhdGEiOnsibnVpZCI6IloiLCJzaXplIjoiOTkiLCJrdnJlZy1zdHJlYW0tc2VxIjoiNyJ9LCJoZWFkZXJzIjp7Ik5hdHMtTm90ZSI6WyJ4XCJ9eyJdfSwibnVpZCI6IkFCQyIsInNpemUiOjEwLCJjaHVua3MiOjEsImRpZ2VzdCI6IlNIQS0yNTY9eCJ9"), info, why),
                     KVREG_OK);
    assert_string_equal(info.nuid.c_str(), "ABC");
    assert_int_equal(info.size, 10);
    assert_true(info.has_seq);
    assert_int_equal(info.stream_seq, 7);
    // Deleted as other clients write it (true unquoted, no digest): none, not a bad object.
    // {"name":"s.0","bucket":"B","nuid":"X","size":0,"chunks":0,"deleted":true}
    assert_int_equal(ObjectStore::info_from(get_answer("eyJuYW1lIjoicy4wIiwiYnVja2V0IjoiQiIsIm51aWQiOiJYIiwic2l6ZSI6MCwiY2h1bmtzIjowLCJkZWxldGVkIjp0cnVlfQ=="), info, why),
                     KVREG_ENOENT);
    // "deleted":false is an object; the stream sequence is read from the metadata only.
    // {"name":"s.0","nuid":"X","size":0,"chunks":0,"digest":"d","deleted":false,"kvreg-stream-seq":"5"}
    assert_int_equal(ObjectStore::info_from(get_answer("eyJuYW1lIjoicy4wIiwibnVpZCI6IlgiLCJzaXplIjowLCJjaHVua3MiOjAsImRpZ2VzdCI6ImQiLCJkZWxldGVkIjpmYWxzZSwia3ZyZWctc3RyZWFtLXNlcSI6IjUifQ=="), info, why),
                     KVREG_OK);
    assert_false(info.has_seq);
    // The error's own code: a 404 nested deeper in it is not the error's.
    assert_int_equal(ObjectStore::info_from(R"({"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"detail":{"code":404},"code":503,"err_code":10008}})", info, why),
                     KVREG_EPROTO);
}

void test_json_member(void **) {
    using kvreg::nats::json_member;
    std::string v;
    const std::string j = R"( { "a" : "x" , "b":{"c":[1,{"d":"}"}],"e":"q\"}"},"n":-12,"t":true,"z":null,"s":"k\n"} )";
    assert_true(json_member(j, "a", v));
    assert_string_equal(v.c_str(), "x");
    assert_true(json_member(j, "b", v));
    assert_string_equal(v.c_str(), R"({"c":[1,{"d":"}"}],"e":"q\"}"})");
    assert_false(json_member(j, "c", v)); // nested: not the object's
    assert_false(json_member(j, "d", v));
    assert_false(json_member(j, "e", v));
    assert_true(json_member(j, "n", v));
    assert_string_equal(v.c_str(), "-12");
    assert_true(json_member(j, "t", v));
    assert_string_equal(v.c_str(), "true");
    assert_true(json_member(j, "z", v));
    assert_string_equal(v.c_str(), "null");
    assert_false(json_member(j, "s", v)); // an escape: not read
    assert_false(json_member(j, "missing", v));
    // Malformed or cut anywhere: a member is read only when its value and what ends it are
    // whole; never a read past the text (ASan runs this too).
    for (size_t n = 0; n + 1 < j.size(); n++) {
        const std::string cut = j.substr(0, n);
        std::string w;
        if (json_member(cut, "t", w)) assert_string_equal(w.c_str(), "true");
        if (json_member(cut, "n", w)) assert_string_equal(w.c_str(), "-12");
        assert_false(json_member(cut, "missing", w));
    }
    assert_false(json_member("[1,2]", "a", v));
    assert_false(json_member(R"({"a" "x"})", "a", v));
    assert_false(json_member(R"({"a":})", "a", v));
    assert_false(json_member(R"({"q":1 "a":2})", "a", v));
    // Nesting within the bound is read past; deeper, the text is refused whole (no recursion
    // either way: the reader's stack is fixed).
    const std::string nested = R"({"x":)" + std::string(30, '[') + std::string(30, ']') + R"(,"a":"y"})";
    assert_true(json_member(nested, "a", v));
    assert_string_equal(v.c_str(), "y");
    const std::string deep = R"({"x":)" + std::string(100000, '[') + std::string(100000, ']') + R"(,"a":"y"})";
    assert_false(json_member(deep, "a", v));
}

} // namespace

int main(void) {
    nats_server_start(&server);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_matched_out_of_order),
        cmocka_unit_test(test_late_answer_not_taken),
        cmocka_unit_test(test_no_responders_ends_at_once),
        cmocka_unit_test(test_closed_inbox_sends_nothing),
        cmocka_unit_test(test_info_from),
        cmocka_unit_test(test_json_member),
    };
    const int failed = cmocka_run_group_tests(tests, nullptr, nullptr);
    nats_server_destroy(&server);
    nats_Close();
    return failed;
}
