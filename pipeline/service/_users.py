"""The user endpoints of the interface: the token's user, any user, and their bots, servers and webhooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ._conventions import Items, answer, window
from ._endpoint import Endpoint, _authenticated_user, _directory, _interface, error
from ._json import JSONResponse
from .directory._truth import Directory


def _target_user(request: Request) -> int | JSONResponse:
    me = _authenticated_user(request)
    if isinstance(me, JSONResponse):
        return me
    user_id = request.path_params.get("user_id")
    if user_id is None or user_id == "@me":  # /users/@me/bots etc. work too
        return me
    user = _directory(request).user_index(user_id)
    return error(404, "unknown user", {"user_id": user_id}) if user is None else user


def _user_endpoint(render: Callable[[Directory, int], Any], *, a_list: bool = False) -> Endpoint:
    @_interface
    async def endpoint(request: Request) -> Response:
        user = _target_user(request)
        if isinstance(user, Response):
            return user
        directory = _directory(request)
        content = render(directory, user)
        if not a_list:
            return JSONResponse(content)
        config = directory.config
        cap = config.user_lists_page_size
        if not cap:
            return answer(request, config, Items.of(content), len(content))
        part = window(request, config, cap, cap)
        if isinstance(part, Response):
            return part
        page = content[part.skip:part.skip + part.limit]
        return answer(request, config, Items.of(page), len(content), part)

    return endpoint


get_me = _user_endpoint(Directory.user_record)


get_user = _user_endpoint(Directory.user_record)


get_user_bots = _user_endpoint(Directory.user_bots, a_list=True)


get_user_servers = _user_endpoint(Directory.user_servers, a_list=True)


get_user_webhooks = _user_endpoint(Directory.user_webhooks, a_list=True)
