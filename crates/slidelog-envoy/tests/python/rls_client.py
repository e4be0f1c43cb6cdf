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


if __name__ == "__main__":
    check_descriptors(sys.argv[2])
    if sys.argv[3:] == ["compat"]:
        call_compat(sys.argv[1])
    else:
        call(sys.argv[1])
    print("python client: ok")
