"""An independent Envoy rate limit client: Python grpcio with Envoy's
published protos (the PyPI package xds-protos), not slidelog's own code.

Usage: rls_client.py HOST:PORT DESCRIPTOR_SET_FILE

1. Compares every message of slidelog's compiled protos (DESCRIPTOR_SET_FILE,
   a FileDescriptorSet) with the published descriptors: same fields, numbers,
   types and labels. slidelog may declare fewer messages, never different ones.
2. Calls ShouldRateLimit on the server (config: domain "api", key "user",
   3 per minute) and checks the answers. Prints "python client: ok" at the end.
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


if __name__ == "__main__":
    check_descriptors(sys.argv[2])
    call(sys.argv[1])
    print("python client: ok")
