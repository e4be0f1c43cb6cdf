"""An independent Envoy rate limit client: Python grpcio with Envoy's
published protos (the PyPI package xds-protos), not slidelog's own code.

Usage: rls_client.py HOST:PORT DESCRIPTOR_SET_FILE [compat]

1. Compares every message of slidelog's compiled protos (DESCRIPTOR_SET_FILE,
   a FileDescriptorSet) with the published descriptors: same fields, numbers,
   types and labels. slidelog may declare fewer messages, never different ones.
2. Calls ShouldRateLimit on the server (config: domain "api", key "user",
   3 per minute) and checks the answers. Prints "python client: ok" at the end.
3. With "compat": instead of 2, calls a server loaded with a config in the
   reference service's own style (domain "compat": wildcards anywhere,
   share_threshold, requests_per_unit 0, unlimited without a unit) and checks
   that the answers are the reference's, and that bytes that are no protobuf
   message are refused with INVALID_ARGUMENT.
4. With "usage": instead of 2, calls a server loaded with domain "usage"
   (user: 3 per minute; model: 1000 per minute with charge: true) the way
   Envoy and its gateways do for usage-based limits: per-descriptor
   hits_addend (google.protobuf.UInt64Value) on a multi-descriptor request,
   hits_addend 0 (a look that records nothing), a hits_addend above the limit
   (OVER_LIMIT, nothing recorded) and above --max-cost (INVALID_ARGUMENT),
   and the apply_on_stream_done pattern: a look at request time, then a
   second ShouldRateLimit at stream end charging the counted usage, which
   counts exactly, over the limit included.
"""
import sys

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2


def check_descriptors(path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    published = descriptor_pool.Default()
    checked = 0

    def walk(prefix, messages):
        nonlocal checked
        for m in messages:
            full = f"{prefix}.{m.name}"
            theirs = published.FindMessageTypeByName(full)
            for field in m.field:
                other = theirs.fields_by_name.get(field.name)
                assert other is not None, f"{full}.{field.name} is not in Envoy's API"
                assert other.number == field.number, f"{full}.{field.name}: number {field.number} != {other.number}"
                assert other.type == field.type, f"{full}.{field.name}: type {field.type} != {other.type}"
                assert other.is_repeated == (field.label == 3), f"{full}.{field.name}: repeated differs"
                if field.type_name:
                    their_type = (other.message_type or other.enum_type).full_name
                    assert field.type_name.lstrip(".") == their_type, f"{full}.{field.name}: {field.type_name} != {their_type}"
                checked += 1
            walk(full, m.nested_type)
            for e in m.enum_type:
                check_enum(f"{full}.{e.name}", e)

    def check_enum(full, e):
        nonlocal checked
        theirs = published.FindEnumTypeByName(full)
        for v in e.value:
            assert theirs.values_by_name[v.name].number == v.number, f"{full}.{v.name}"
            checked += 1

    for f in fds.file:
        if f.package.startswith("google."):
            continue
        walk(f.package, f.message_type)
        for e in f.enum_type:
            check_enum(f"{f.package}.{e.name}", e)
        for s in f.service:
            theirs = published.FindServiceByName(f"{f.package}.{s.name}")
            for m in s.method:
                assert theirs.methods_by_name[m.name].input_type.full_name == m.input_type.lstrip(".")
                assert theirs.methods_by_name[m.name].output_type.full_name == m.output_type.lstrip(".")
                checked += 1
    assert checked > 40, f"only {checked} fields checked"
    print(f"descriptor check: {checked} fields, values and methods match Envoy's API")


def call(addr):
    Code = rls_pb2.RateLimitResponse.Code
    Unit = rls_pb2.RateLimitResponse.RateLimit.Unit
    with grpc.insecure_channel(addr) as channel:
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)

        def ask(value, hits=0):
            d = ratelimit_pb2.RateLimitDescriptor(
                entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key="user", value=value)]
            )
            other = ratelimit_pb2.RateLimitDescriptor(
                entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key="nothing", value="x")]
            )
            req = rls_pb2.RateLimitRequest(domain="api", descriptors=[d, other], hits_addend=hits)
            return stub.ShouldRateLimit(req, timeout=10)

        r = ask("py")
        assert r.overall_code == Code.OK, r
        s = r.statuses[0]
        assert s.code == Code.OK
        assert s.current_limit.requests_per_unit == 3 and s.current_limit.unit == Unit.MINUTE, s
        assert s.limit_remaining == 2, s
        assert 59 <= s.duration_until_reset.seconds <= 60, s
        assert r.statuses[1].code == Code.OK and not r.statuses[1].HasField("current_limit")

        r = ask("py", hits=2)
        assert r.overall_code == Code.OK and r.statuses[0].limit_remaining == 0, r
        r = ask("py")
        assert r.overall_code == Code.OVER_LIMIT, r
        assert r.statuses[0].code == Code.OVER_LIMIT
        assert r.statuses[1].code == Code.OK
        assert ask("other").overall_code == Code.OK

        try:
            stub.ShouldRateLimit(rls_pb2.RateLimitRequest(domain=""), timeout=10)
            raise AssertionError("an empty domain must be rejected")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    print("grpc calls: OK, OVER_LIMIT and INVALID_ARGUMENT as expected")


def call_compat(addr):
    Code = rls_pb2.RateLimitResponse.Code
    Unit = rls_pb2.RateLimitResponse.RateLimit.Unit
    with grpc.insecure_channel(addr) as channel:
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)

        def ask(*entries):
            d = ratelimit_pb2.RateLimitDescriptor(
                entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in entries]
            )
            req = rls_pb2.RateLimitRequest(domain="compat", descriptors=[d])
            return stub.ShouldRateLimit(req, timeout=10).statuses[0]

        # A wildcard in the middle matches; each value has its own log (2 per minute).
        for value in ["bar-1-b", "bar-2-b"]:
            s = ask(("mid", value))
            assert s.code == Code.OK and s.limit_remaining == 1, s
        assert not ask(("mid", "bar-1-bx")).HasField("current_limit")
        # Several stars.
        s = ask(("multi", "foo.x.bar.y.baz"))
        assert s.code == Code.OK and s.current_limit.requests_per_unit == 5, s
        # share_threshold: 3 per minute shared by every value of files/*.
        remaining = [ask(("files", f"files/{n}")).limit_remaining for n in ["a", "b", "c"]]
        assert remaining == [2, 1, 0], remaining
        s = ask(("files", "files/d"))
        assert s.code == Code.OVER_LIMIT, s
        # requests_per_unit 0: always over the limit.
        s = ask(("blocked", "anyone"))
        assert s.code == Code.OVER_LIMIT and s.current_limit.requests_per_unit == 0, s
        assert s.current_limit.unit == Unit.HOUR, s
        # unlimited beside requests_per_unit, without a unit.
        for _ in range(3):
            s = ask(("trusted", "me"))
            assert s.code == Code.OK and s.limit_remaining == 2**32 - 1, s
        # Exact before wildcard before the value-less key.
        assert ask(("k", "ab")).current_limit.requests_per_unit == 7
        assert ask(("k", "axx")).current_limit.requests_per_unit == 8
        assert ask(("k", "zz")).current_limit.requests_per_unit == 9

        raw = channel.unary_unary(
            "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        try:
            raw(b"\xff\xff\xff\xff", timeout=10)
            raise AssertionError("bytes that are no message must be rejected")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    print("compat calls: wildcards, share_threshold, blocking, unlimited and bad bytes as the reference")


def call_usage(addr):
    Code = rls_pb2.RateLimitResponse.Code
    Descriptor = ratelimit_pb2.RateLimitDescriptor
    with grpc.insecure_channel(addr) as channel:
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)

        def descriptor(key, value, hits=None):
            d = Descriptor(entries=[Descriptor.Entry(key=key, value=value)])
            if hits is not None:
                # A wrapper: set, even to 0, it is the descriptor's own cost.
                d.hits_addend.value = hits
            return d

        def ask(*descriptors, hits=0):
            req = rls_pb2.RateLimitRequest(domain="usage", descriptors=descriptors, hits_addend=hits)
            return stub.ShouldRateLimit(req, timeout=10)

        def remaining(r):
            return [(s.code, s.limit_remaining) for s in r.statuses]

        def refused(*descriptors, hits=0):
            try:
                ask(*descriptors, hits=hits)
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
                return e.details()
            raise AssertionError("must be refused")

        # Per-descriptor hits_addend on a multi-descriptor request: each
        # descriptor's own cost; the request's (here 1) where none is set.
        r = ask(descriptor("user", "a", 2), descriptor("model", "m1", 300),
                descriptor("nothing", "x", 5), descriptor("user", "b"), hits=1)
        assert r.overall_code == Code.OK, r
        assert remaining(r) == [(Code.OK, 1), (Code.OK, 700), (Code.OK, 0), (Code.OK, 2)], r
        assert not r.statuses[2].HasField("current_limit")

        # hits_addend 0: a look that records nothing, OK while the log is not
        # over (a full log included, as the reference's INCRBY 0 answers).
        for _ in range(3):
            r = ask(descriptor("user", "a", 0), descriptor("model", "m1", 0))
            assert remaining(r) == [(Code.OK, 1), (Code.OK, 700)], r
        assert remaining(ask(descriptor("user", "a", 1))) == [(Code.OK, 0)]
        r = ask(descriptor("user", "a", 0))
        assert r.overall_code == Code.OK and remaining(r) == [(Code.OK, 0)], r
        r = ask(descriptor("user", "a", 1))
        assert r.overall_code == Code.OVER_LIMIT, r

        # Above the limit (3) but within --max-cost: OVER_LIMIT, as the
        # reference; on a rule that does not charge it records nothing.
        r = ask(descriptor("user", "c", 4))
        assert r.overall_code == Code.OVER_LIMIT, r
        assert r.statuses[0].current_limit.requests_per_unit == 3, r
        assert remaining(ask(descriptor("user", "c", 1))) == [(Code.OK, 2)]

        # Hostile values: refused with INVALID_ARGUMENT naming the field and
        # the bound; nothing of the request is recorded.
        msg = refused(descriptor("user", "d", 1), descriptor("model", "m1", 2**64 - 1))
        assert "descriptors[1]: hits_addend" in msg and "--max-cost" in msg, msg
        msg = refused(descriptor("user", "d"), hits=2**32 - 1)
        assert "request hits_addend" in msg and "--max-cost" in msg, msg
        assert remaining(ask(descriptor("user", "d", 0))) == [(Code.OK, 3)]

        # apply_on_stream_done, as Envoy AI Gateway sends it: a look (0) at
        # request time, then at stream end a second call charging the
        # counted tokens. The charge counts exactly, even over the limit.
        assert remaining(ask(descriptor("model", "m2", 0))) == [(Code.OK, 1000)]
        assert remaining(ask(descriptor("model", "m2", 600))) == [(Code.OK, 400)]
        assert remaining(ask(descriptor("model", "m2", 0))) == [(Code.OK, 400)]
        assert remaining(ask(descriptor("model", "m2", 400))) == [(Code.OK, 0)]
        assert remaining(ask(descriptor("model", "m2", 0))) == [(Code.OK, 0)]
        # Tokens counted past the limit are recorded too: the stream-done
        # call answers OVER_LIMIT (Envoy ignores it), and the next request's
        # look is over until enough slides out.
        r = ask(descriptor("model", "m2", 250))
        assert r.overall_code == Code.OVER_LIMIT and r.statuses[0].limit_remaining == 0, r
        r = ask(descriptor("model", "m2", 0))
        assert r.overall_code == Code.OVER_LIMIT, r
        assert 1 <= r.statuses[0].duration_until_reset.seconds <= 60, r
        # Another model's budget is its own.
        assert remaining(ask(descriptor("model", "m3", 0))) == [(Code.OK, 1000)]
    print("usage calls: per-descriptor hits_addend, looks, charges at stream end and bounds as the reference")


if __name__ == "__main__":
    check_descriptors(sys.argv[2])
    if sys.argv[3:] == ["compat"]:
        call_compat(sys.argv[1])
    elif sys.argv[3:] == ["usage"]:
        call_usage(sys.argv[1])
    else:
        call(sys.argv[1])
    print("python client: ok")
