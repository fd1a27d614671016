"""A realistic project for the console's browser tests and the README's screenshots: a web shop's
30-task plan run by four agents, one of them gone silent while holding a task, one failure that
blocks the packaging, a design gate waiting for a person, a review waiting, work done and in flight."""

from __future__ import annotations

import anyio

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, RecordProgressArgs, SaveCheckpointArgs, UpdateTaskArgs
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.store.connection import Query
from support import settings_for

T = TaskSpec
PLAN = [
    T(key="schema", title="Database schema for orders and users", priority=5, tags=["backend"]),
    T(key="api-spec", title="OpenAPI spec for the shop API", priority=5, tags=["backend"]),
    T(key="ui-mock", title="Clickable mock-up of checkout", tags=["frontend"]),
    T(key="design-signoff", title="Design sign-off", kind="gate", depends_on=["ui-mock"]),
    T(key="auth", title="Sign-in with passkeys", depends_on=["schema", "api-spec"], tags=["backend"]),
    T(key="api-orders", title="Orders endpoints", depends_on=["schema", "api-spec"], tags=["backend"]),
    T(key="api-users", title="Users endpoints", depends_on=["schema", "api-spec", "auth"], tags=["backend"]),
    T(key="api-payments", title="Payment capture, idempotent", depends_on=["api-orders"], tags=["backend"]),
    T(key="design-system", title="Design system tokens and buttons", depends_on=["design-signoff"], tags=["frontend"]),
    T(key="ui-cart", title="Cart page", depends_on=["api-orders", "design-system"], tags=["frontend"]),
    T(key="ui-users", title="Account pages", depends_on=["api-users", "design-system"], tags=["frontend"]),
    T(key="ui-profile", title="Profile and addresses", depends_on=["api-users"], tags=["frontend"]),
    T(key="ui-checkout", title="Checkout flow", depends_on=["api-payments", "ui-cart"], tags=["frontend"]),
    T(key="ci-linux", title="CI on Linux runners", tags=["ci"]),
    T(key="ci-arm", title="CI on the ARM runner", max_attempts=1, tags=["ci"]),
    T(key="packaging", title="Container images for x86 and ARM", depends_on=["ci-linux", "ci-arm"], tags=["ci"]),
    T(key="security-review", title="Security review of auth", review=True, depends_on=["auth"], tags=["backend"]),
    T(key="staging", title="Deploy to staging", depends_on=["packaging", "ui-checkout", "ui-users"]),
    T(key="load-test", title="Load test: 500 orders a minute", depends_on=["staging"]),
    T(key="docs-api", title="API reference", depends_on=["api-orders"], tags=["docs"]),
    T(key="docs-user", title="User guide", depends_on=["ui-checkout"], tags=["docs"]),
    T(key="changelog", title="Changelog for 1.0", tags=["docs"]),
    T(key="emails", title="Order confirmation emails", depends_on=["api-orders"], tags=["backend"]),
    T(key="search", title="Product search", depends_on=["schema"], tags=["backend"]),
    T(key="ui-search", title="Search box and results", depends_on=["search", "design-system"], tags=["frontend"]),
    T(key="analytics", title="Privacy-friendly analytics", tags=["frontend"]),
    T(key="backups", title="Nightly database backups", depends_on=["schema"], tags=["ops"]),
    T(key="monitoring", title="Dashboards and alerts", depends_on=["staging"], tags=["ops"]),
    T(key="release", title="Release 1.0", depends_on=["load-test", "security-review", "docs-user", "monitoring"]),
    T(key="announce", title="Announce the launch", depends_on=["release"]),
]
AGENTS = ("bob", "carol", "dana", "erin")
DONE_ORDER = ("schema", "api-spec", "ci-linux", "ui-mock", "auth", "api-orders", "docs-api", "backups")


def build(db: str, workspace: str) -> dict[str, str]:
    """The project in mid-run. Dana holds api-users and then makes no call (her process was killed);
    bob works on api-payments; ci-arm failed for good; the design gate and a review wait on a person.
    Returns the lease tokens of the tasks bob and carol hold."""

    async def main() -> dict[str, str]:
        async with Harness.open(settings_for(db)) as h:
            lead = Identity(workspace, "alice")
            await h.tasks.add(lead, AddTasksArgs(tasks=PLAN))
            who = {a: Identity(workspace, a) for a in AGENTS}

            async def finish(agent: str, key: str, note: str) -> None:
                got = await h.tasks.claim(who[agent], ClaimTaskArgs(task_key=key))
                await h.contacts.touch(who[agent], "claim_task", got)
                await h.progress.record(who[agent], RecordProgressArgs(summary=note, status="done", task_key=key))
                await h.tasks.update(
                    who[agent],
                    UpdateTaskArgs(
                        task_key=key, action="complete", lease_token=got.lease.token, verification="tests pass"
                    ),
                )

            await finish("bob", "schema", "Schema migrated: orders, order_lines, users, addresses")
            await finish("carol", "api-spec", "OpenAPI spec published under docs/api")
            await finish("erin", "ci-linux", "CI green on Linux for every push")
            await finish("erin", "ui-mock", "Mock-up of checkout shared for sign-off")
            await finish("bob", "auth", "Passkey sign-in works end to end")
            await finish("bob", "api-orders", "Orders endpoints done, 98% covered")
            await finish("carol", "docs-api", "API reference generated from the spec")
            await finish("erin", "backups", "Nightly backups to object storage, restore tested")
            got = await h.tasks.claim(who["erin"], ClaimTaskArgs(task_key="ci-arm"))
            await h.progress.record(
                who["erin"],
                RecordProgressArgs(summary="ARM runner image lacks libssl3", status="blocked", task_key="ci-arm"),
            )
            await h.tasks.update(
                who["erin"],
                UpdateTaskArgs(
                    task_key="ci-arm",
                    action="fail",
                    lease_token=got.lease.token,
                    retry=False,
                    error="the ARM runner image lacks libssl3: needs a new base",
                ),
            )
            got = await h.tasks.claim(who["carol"], ClaimTaskArgs(task_key="security-review"))
            await h.tasks.update(
                who["carol"],
                UpdateTaskArgs(
                    task_key="security-review",
                    action="complete",
                    lease_token=got.lease.token,
                    verification="threat model in docs/",
                ),
            )
            dana = await h.tasks.claim(who["dana"], ClaimTaskArgs(task_key="api-users", lease_seconds=1200))
            await h.contacts.touch(who["dana"], "claim_task", dana)
            await h.progress.record(
                who["dana"],
                RecordProgressArgs(summary="Started the users endpoints", status="in_progress", task_key="api-users"),
            )
            await h.checkpoints.save(
                who["bob"],
                SaveCheckpointArgs(
                    thread="main",
                    label="orders done",
                    state={"task": "api-orders", "done": ["list", "create"], "next": "cancel"},
                ),
            )
            await h.checkpoints.save(
                who["bob"],
                SaveCheckpointArgs(
                    thread="main",
                    label="payments started",
                    state={"task": "api-payments", "done": ["capture"], "next": "refunds", "id": "pay_7f3a"},
                ),
            )
            bob = await h.tasks.claim(who["bob"], ClaimTaskArgs(task_key="api-payments", lease_seconds=900))
            await h.contacts.touch(who["bob"], "claim_task", bob)
            await h.progress.record(
                who["bob"],
                RecordProgressArgs(
                    summary="Capture works against the sandbox; idempotency next",
                    status="in_progress",
                    task_key="api-payments",
                ),
            )
            carol = await h.tasks.claim(who["carol"], ClaimTaskArgs(task_key="emails", lease_seconds=900))
            await h.contacts.touch(who["carol"], "claim_task", carol)
            idle = await h.tasks.claim(who["erin"], ClaimTaskArgs(tags=["ci"]))
            await h.contacts.touch(who["erin"], "claim_task", idle)
            async with h.db.write() as conn:  # dana's process was killed 11 minutes ago
                backdate = (
                    ("tasks", "updated_at", "owner"),
                    ("agent_contacts", "seen_at", "agent"),
                    ("progress", "created_at", "agent"),
                )
                for table, column, who in backdate:
                    sql = f"UPDATE {table} SET {column} = {column} - 660 WHERE workspace = :ws AND {who} = 'dana'"
                    await conn.execute(Query(sql), {"ws": workspace})
            async with h.db.write() as conn:  # the plan was made three days ago, the work done since
                await conn.execute(
                    Query("UPDATE tasks SET created_at = created_at - 259200 WHERE workspace = :ws"), {"ws": workspace}
                )
                for i, key in enumerate(DONE_ORDER):
                    back = (len(DONE_ORDER) - i) * 21600 - 3600  # one every six hours, the last an hour ago
                    for sql in (
                        "UPDATE tasks SET completed_at = completed_at - :back, updated_at = updated_at - :back "
                        'WHERE workspace = :ws AND "key" = :key',
                        "UPDATE task_events SET created_at = created_at - :back "
                        "WHERE workspace = :ws AND task_key = :key",
                    ):
                        await conn.execute(Query(sql), {"ws": workspace, "key": key, "back": back})
            return {"api-payments": bob.lease.token, "emails": carol.lease.token}

    return anyio.run(main)
