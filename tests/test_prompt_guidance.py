"""What the prompts and errors tell a model to do: the initializer gives tasks their `paths` and keeps
irreversible steps apart from reviewed ones; an unknown task key points at list_tasks; a claimed gate
points at the operators. Through the MCP client against the real server."""

from __future__ import annotations

import pytest
from support import call, fail, mcp_client

pytestmark = pytest.mark.anyio


async def test_the_initializer_asks_for_paths_and_irreversible_steps_apart(client):
    prompt = await client.get_prompt("initialize_project", {"goal": "a CLI"})
    text = prompt.messages[0].content.text
    assert "`paths` it will touch" in text and "commit guard never engages" in text, text
    assert "irreversible step (tag, publish, deploy) in a task" in text, text
    assert "never inside a reviewed task's steps" in text, text


async def test_the_working_session_knows_a_last_attempt_and_a_lost_lease(client):
    text = (await client.get_prompt("resume_session", {})).messages[0].content.text
    assert "last_attempt: true is the task's last: release it" in text and "lease_lost means" in text, text


async def test_an_unknown_task_key_points_at_list_tasks(db_url, workspace):
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "add_tasks", tasks=[{"key": "a", "title": "A"}])
        for tool, args in [
            ("claim_task", {"task_key": "nope"}),
            ("update_task", {"task_key": "nope", "action": "reopen", "reason": "r"}),
            ("list_tasks", {"task_key": "nope"}),
            ("record_progress", {"summary": "s", "task_key": "nope"}),
            ("message", {"action": "send", "to": "*", "body": "b", "task_key": "nope"}),
        ]:
            missing = await fail(ann, tool, **args)
            assert missing.code == "not_found" and "list_tasks shows the keys" in missing.text, (tool, missing.text)


async def test_claiming_a_gate_says_to_message_the_operators(db_url, workspace):
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "add_tasks", tasks=[{"key": "ship", "title": "Ship?", "kind": "gate"}])
        refused = await fail(ann, "claim_task", task_key="ship")
        assert refused.code == "invalid_argument", refused.text
        assert "message(action='send', to='operators', task_key='ship'" in refused.text, refused.text
        approve = await fail(ann, "update_task", task_key="ship", action="approve")
        assert approve.code == "forbidden" and "to='operators'" in approve.text, approve.text
