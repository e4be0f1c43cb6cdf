"""Calls a running `slidelog serve` through the client openapi-python-client
generated from its /openapi.json: one check and one settle (argv: base URL,
admin token), and with `block` as third argument one block (putBlock, then a
check refused with the block's reason). Prints what it saw; exits non-zero
on any surprise."""
import sys

from slidelog_client import AuthenticatedClient, Client
from slidelog_client.api.decisions import check
from slidelog_client.api.usage import settle
from slidelog_client.models import Decision, DecisionRequest, SettleAnswer, SettleRequest

base, token = sys.argv[1], sys.argv[2]
client = Client(base_url=base)

# One check: admitted, with a receipt (cost 4 of 10 a minute).
response = check.sync_detailed(client=client, body=DecisionRequest(key="py", max_=10, window_ms=60000, cost=4))
assert response.status_code == 200, response
decision = response.parsed
assert isinstance(decision, Decision), decision
assert decision.allowed and decision.count == 4 and decision.remaining == 6, decision
assert decision.receipt, decision

# One settle: the actual cost was 1.
body = SettleRequest(key="py", max_=10, window_ms=60000, cost=1, receipt=decision.receipt)
response = settle.sync_detailed(client=client, body=body)
assert response.status_code == 200, response
settled = response.parsed
assert isinstance(settled, SettleAnswer), settled
assert settled.settled and settled.count == 1 and settled.remaining == 9, settled
print("check and settle ok")

if len(sys.argv) > 3 and sys.argv[3] == "block":
    from slidelog_client.api.admin import put_block
    from slidelog_client.models import BlockRequest

    admin = AuthenticatedClient(base_url=base, token=token)
    response = put_block.sync_detailed("py", client=admin, body=BlockRequest(duration_ms=60000, reason="abuse"))
    assert response.status_code == 200, response
    response = check.sync_detailed(client=client, body=DecisionRequest(key="py", max_=10, window_ms=60000))
    assert response.status_code == 429, response
    assert b"abuse" in response.content, response.content
    print("block ok")
