"""What the console's forms do: sign in (a one-time code or a bearer token), sign out, the operator's
actions on a task (`ACTIONS`), messages, a fork of a thread from one of its versions, and a stop asked
of a runner's session. Every POST must come from the console's own origin with the session's CSRF
token; actions need the `operator` role and act under the person's name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_harness.arguments import MessageArgs, SaveCheckpointArgs, UpdateTaskArgs
from mcp_harness.console.app import Console, Redirect, page, read_form
from mcp_harness.console.auth import CodeLogin, Session, check_form, check_origin, clear_cookie, set_cookie
from mcp_harness.errors import Forbidden, InvalidArgument, NotFound
from mcp_harness.mcp.metrics import CONSOLE_ACTIONS, count_console_action
from mcp_harness.service import Identity
from mcp_harness.tasks.rules import PERSON_ACTIONS, RULES


@page
async def login_page(console: Console, request: Request) -> Response:
    code = request.query_params.get("code")
    login = console.login
    if code is not None and isinstance(login, CodeLogin):
        sid = login.redeem(code)
        if sid is None:
            return _login(
                console,
                request,
                403,
                "This login code was already used, or it is not the one "
                "mcp-harness ui printed. Use the browser window that opened it, or restart "
                "mcp-harness ui for a new code.",
            )
        response = RedirectResponse(console.url("/"), status_code=303)
        set_cookie(request, response, sid)
        return response
    if await login.session(request) is not None:
        raise Redirect(console.url("/"))
    return _login(console, request, 200, None)


def _login(console: Console, request: Request, status: int, error: str | None) -> Response:
    return console.render(
        request,
        "login.html",
        status,
        session=None,
        workspace=None,
        title="Sign in",
        error=error,
        kind=console.login.kind,
    )


@page
async def login(console: Console, request: Request) -> Response:
    """Sign in with a bearer token (the shared server's `/ui`)."""
    check_origin(request)
    if isinstance(console.login, CodeLogin):
        raise Forbidden("this console signs in with the login code that mcp-harness ui printed")
    form = await read_form(request)
    token = str(form.get("token") or "").strip()
    sid = await console.login.start(token) if token else None
    if sid is None:
        return _login(
            console,
            request,
            401,
            "That token is not valid (mistyped, or revoked). Ask for a new one: "
            "mcp-harness token create --workspace W --agent YOUR-NAME --role operator",
        )
    response = RedirectResponse(console.url("/"), status_code=303)
    set_cookie(request, response, sid)  # the session id: the token itself never leaves this request
    return response


@page
async def logout(console: Console, request: Request) -> Response:
    session = await console.session(request)
    form = await read_form(request)
    check_form(request, session, _field(form, "csrf"))
    await console.login.end(request)
    response = RedirectResponse(console.url("/login"), status_code=303)
    clear_cookie(request, response)
    return response


@dataclass(frozen=True)
class ActionForm:
    """One operator button's form: the field its action records (`reason` or `comment`), whether it must
    be filled, and the word for the flash message after it (all from the action's rule)."""

    field: str | None
    required: bool
    done: str


#: the operator's actions on one task (the `update_task` actions a person takes, `PERSON_ACTIONS`), run
#: through `tasks.update` as the tool and the CLI run them
ACTIONS: dict[str, ActionForm] = {
    name: ActionForm(RULES[action].argument, bool(RULES[action].required), RULES[action].done)
    for name, action in PERSON_ACTIONS.items()
}


@page
async def act(console: Console, request: Request) -> Response:
    """POST /task/{action}: one of `ACTIONS` on one task, as the signed-in person, recorded by the
    service as a task event and a progress entry naming them."""
    name = request.path_params["action"]
    action = ACTIONS.get(name)
    if action is None:
        raise NotFound(f"no console action {name!r}; there are: {', '.join(ACTIONS)}")
    session = await console.session(request)
    form = await read_form(request)
    check_form(request, session, _field(form, "csrf"))
    if not session.can_act:
        raise Forbidden(f"{name} needs the operator role; this sign-in is a {session.role}")
    workspace, key = _field(form, "w"), _field(form, "key")
    if not workspace or not key:
        raise InvalidArgument("the form names no task")
    if not session.may_see(workspace):
        raise Forbidden(f"this sign-in may act in workspace {session.workspace!r} only")
    given: dict[str, Any] = {}
    if action.field is not None:
        text = (_field(form, action.field) or "").strip()
        if action.required and not text:
            raise InvalidArgument(RULES[PERSON_ACTIONS[name]].blank_refusal(name))
        if text:
            given[action.field] = text
    nonce = _field(form, "nonce")
    await console.harness.tasks.update(
        Identity(workspace=workspace, agent=session.agent, role="operator"),
        UpdateTaskArgs(
            task_key=key, action=name, idempotency_key=f"console:{name}:{nonce}" if nonce else None, **given
        ),
    )
    count_console_action(name)
    return RedirectResponse(console.url("/task", w=workspace, key=key, done=action.done), status_code=303)


@page
async def stop_session(console: Console, request: Request) -> Response:
    """POST /sessions/stop: an operator asks a running session to stop; its runner stops it within
    seconds (its outcome is then `stopped`)."""
    session = await console.session(request)
    form = await read_form(request)
    check_form(request, session, _field(form, "csrf"))
    who = _person(session, form, "stopping a session needs")
    session_id = _field(form, "id")
    if not session_id:
        raise InvalidArgument("the form names no session")
    await console.harness.runs.request_stop(who, session_id)
    count_console_action("stop_session")
    return RedirectResponse(console.url("/sessions", w=who.workspace, stopped=1), status_code=303)


for _name in (*ACTIONS, "fork", "stop_session"):  # the metrics: every action's series at 0 from the start
    CONSOLE_ACTIONS.labels(_name)


def _field(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


def _person(session: Session, form: FormData, needs: str = "messages need") -> Identity:
    """The signed-in person acting in the form's workspace, as an operator (checked; `needs` says what
    needs the role, for the refusal)."""
    workspace = _field(form, "w")
    if not workspace:
        raise InvalidArgument("the form names no workspace")
    if not session.can_act:
        raise Forbidden(f"{needs} the operator role; this sign-in is a {session.role}")
    if not session.may_see(workspace):
        raise Forbidden(f"this sign-in may act in workspace {session.workspace!r} only")
    return Identity(workspace=workspace, agent=session.agent, role="operator")


@page
async def send_message(console: Console, request: Request) -> Response:
    """POST /messages/send: a person's message (a reply, or a new one about a task), as the tool sends it."""
    session = await console.session(request)
    form = await read_form(request)
    check_form(request, session, _field(form, "csrf"))
    who = _person(session, form)
    key = _field(form, "key") or None
    nonce = _field(form, "nonce")
    await console.harness.messages.act(
        who,
        MessageArgs(
            action="send",
            to=(_field(form, "to") or "").strip(),
            body=_field(form, "body") or "",
            task_key=key,
            reply_to=_field(form, "reply_to") or None,
            idempotency_key=f"console:message:{nonce}" if nonce else None,
        ),
    )
    if _field(form, "back") == "task" and key:
        return RedirectResponse(console.url("/task", w=who.workspace, key=key) + "#messages", status_code=303)
    return RedirectResponse(console.url("/inbox", w=who.workspace, sent=1), status_code=303)


@page
async def ack_message(console: Console, request: Request) -> Response:
    """POST /messages/ack: the person has dealt with a message (it leaves the inbox)."""
    session = await console.session(request)
    form = await read_form(request)
    check_form(request, session, _field(form, "csrf"))
    who = _person(session, form)
    message_id = _field(form, "id")
    if not message_id:
        raise InvalidArgument("the form names no message")
    await console.harness.messages.act(who, MessageArgs(action="ack", ids=[message_id]))
    return RedirectResponse(console.url("/inbox", w=who.workspace), status_code=303)


@page
async def fork(console: Console, request: Request) -> Response:
    """POST /thread/fork: start a new thread from one checkpoint version, as `save_checkpoint(fork_from=...)`
    does (an empty merge patch: version 1 of the new thread is that version's state), saved under the
    person's name; then the new thread."""
    session = await console.session(request)
    form = await read_form(request)
    check_form(request, session, _field(form, "csrf"))
    who = _person(session, form, "forking a thread needs")
    source = _field(form, "checkpoint")
    if not source:
        raise InvalidArgument("the form names no checkpoint to fork")
    name = (_field(form, "name") or "").strip()
    if not name:
        raise InvalidArgument("a fork needs the new thread's name")
    nonce = _field(form, "nonce")
    saved = await console.harness.checkpoints.save(
        who,
        SaveCheckpointArgs(
            thread=name,
            fork_from=source,
            mode="merge",
            state={},
            idempotency_key=f"console:fork:{nonce}" if nonce else None,
        ),
    )
    count_console_action("fork")
    return RedirectResponse(console.url("/thread", w=who.workspace, t=saved.thread, forked=1), status_code=303)
