"""Checks of the optional durable inbox (declared with ``ConformanceHost.durable_inbox``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from actors._contract import SessionEvent, UserMessage
from host_bridge.testing.conformance._base import ConformanceBase, expect

__all__ = ["InboxChecks"]

INBOX = "durable inbox"


class InboxChecks(ConformanceBase):
    """Follow-ups persisted in the log; turns only after a flush covering them."""

    def durable_reader(self) -> Callable[[str], Sequence[SessionEvent]]:
        self.need(self.host.durable_inbox, "durable_inbox")
        self.need(self.host.durable_events, "durable_events")
        reader = self.host.durable_events
        assert reader is not None
        return reader

    def test_followup_persists_the_message_and_its_turn_waits_for_durability(self) -> None:
        """``followup`` appends the message to the session log before it returns, and
        its turn starts only once a flush made that entry durable (it is readable back
        when the model sees the message)."""
        read_back = self.durable_reader()
        agent, model = self.spawn()
        self.wait_idle(agent, "Agent.when_idle")
        session = agent.session
        before = len(session.events)
        durable_at_start: list[int] = []
        model.on_enter.append(lambda _i, _m: durable_at_start.append(len(read_back(session.id))))
        self.followup(agent)
        after = len(session.events)
        expect(after > before, INBOX, "followup returned without appending the message")
        self.wait(model.entered(0), INBOX, "the follow-up turn starting")
        expect(
            durable_at_start and durable_at_start[0] >= after,
            INBOX,
            f"the turn started with {durable_at_start[:1]} events durable; its entry "
            f"(ending at seq {after - 1}) was not",
        )
        self.wait_idle(agent, "Agent.when_idle")

    def test_turn_after_release_waits_for_the_reservers_appends(self) -> None:
        """A follow-up queued while reserved starts its turn only after ``release()`` and
        a flush covering the entry *and* what the reserver appended after it (for
        Schedule: the ``dispatch`` record), so a crash cannot keep one without the other."""
        read_back = self.durable_reader()
        agent, model = self.spawn()
        self.wait_idle(agent, "Agent.when_idle")
        session = agent.session
        release = agent.reserve_turn_admission()
        expect(release is not None, "Agent.reserve_turn_admission", "refused an idle agent")
        assert release is not None
        durable_at_start: list[int] = []
        model.on_enter.append(lambda _i, _m: durable_at_start.append(len(read_back(session.id))))
        self.followup(agent, UserMessage(self.message("reserved").content, {"kind": "plugin"}))
        record = session.append("conformance/probe", {"after": "followup"})
        self.release(agent, release)
        self.wait(model.entered(0), INBOX, "the turn starting after release()")
        expect(
            durable_at_start and durable_at_start[0] > record.seq,
            INBOX,
            f"the turn started with {durable_at_start[:1]} events durable; the reserver's "
            f"append (seq {record.seq}) made after the follow-up was not",
        )
        self.wait_idle(agent, "Agent.when_idle")
