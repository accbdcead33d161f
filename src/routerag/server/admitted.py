"""An admitted ask's ticket (one unit of the service's ``asks``), given back exactly once where the
ask ends, by its reply, whichever FastAPI version runs the routes (FastAPI 0.106 to 0.117 exit a
``yield`` dependency as the route returns, before a streamed response is sent; 0.118 after it):

* a reply that is not streamed gives it back once the run is over (:meth:`AdmittedAsk.replied`);
* a streamed reply (:class:`AdmittedStream`) takes the ticket over and gives it back when the
  response ends: its body sent to the end, failed, cancelled, or abandoned by a client that
  disconnected;
* the dependency that admitted the ask (:func:`routerag.server.deps.admit_ask`) gives it back when
  the route ended without a streamed reply (a refusal raised after the admission, say).

A ticket given back twice is given back once (:meth:`routerag.edge.admission.Ticket.release`)."""

from __future__ import annotations

from collections.abc import AsyncIterable

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from routerag.edge.admission import Ticket

__all__ = ["AdmittedAsk", "AdmittedStream"]


class AdmittedAsk:
    """The ticket of one admitted ask, held by its route until a streamed reply takes it over."""

    def __init__(self, ticket: Ticket) -> None:
        self._ticket = ticket
        self._taken = False

    def replied(self) -> None:
        """The ask's run is over and its reply made: the ticket is given back."""
        self._ticket.release()

    def take(self) -> Ticket:
        """The ticket, for a streamed reply that gives it back when it ends."""
        self._taken = True
        return self._ticket

    def route_ended(self) -> None:
        """The route is done: the ticket is given back unless a streamed reply holds it."""
        if not self._taken:
            self._ticket.release()


class AdmittedStream(StreamingResponse):
    """Server-sent ``events`` that give ``admitted``'s ticket back when the response ends, however it ends."""

    def __init__(self, events: AsyncIterable[str], admitted: AdmittedAsk) -> None:
        super().__init__(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        self._ticket = admitted.take()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:  # sent, failed, cancelled, or its client gone
            self._ticket.release()
