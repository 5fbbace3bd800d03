"""Checks of the optional durable inbox (declared with ``ConformanceHost.durable_inbox``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from actors._contract import Agent, SessionEvent, UserMessage
from host_bridge.testing.conformance._base import ConformanceBase, expect
from host_bridge.testing.conformance._host import TurnModel

__all__ = ["InboxChecks"]

INBOX = "durable inbox"


class InboxChecks(ConformanceBase):
    """Follow-ups persisted in the log; turns only after a flush covering them;
    completed turns not run again, unfinished ones re-queued first on resume."""

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

    def resumer(self) -> Callable[[str, TurnModel], Agent]:
        self.durable_reader()
        self.need(self.host.detach, "detach")
        self.need(self.host.dispose, "dispose")
        self.need(self.host.resume_root, "resume_root")
        resume = self.host.resume_root
        assert resume is not None
        return resume

    def take_offline(self, agent: Agent) -> str:
        """Make the session's log durable, dispose its agent, detach it; its id."""
        session = agent.session
        sessions = self.ctx.sessions
        assert sessions is not None
        self.wait(sessions.flush(session), INBOX, "a flush before the session is closed")
        assert self.host.dispose is not None and self.host.detach is not None
        self.host.dispose(agent)
        self.host.detach(session)
        return session.id

    def test_a_completed_turn_is_not_run_again_after_a_resume(self) -> None:
        """Rule 3: a turn that ended records its completion, so a resume of the session
        does not queue its message again."""
        resume = self.resumer()
        agent, model = self.spawn()
        done = self.followup(agent)
        self.wait(model.entered(0), INBOX, "the turn starting")
        self.wait_idle(agent, "Agent.when_idle")
        session_id = self.take_offline(agent)
        again = self.model()
        resumed = resume(session_id, again)
        later = self.followup(resumed)
        first = self.wait(again.entered(0), INBOX, "a turn of the resumed agent")
        expect(
            first.text == later.text,
            INBOX,
            f"after a resume the agent ran {first.text!r} first; the completed turn of "
            f"{done.text!r} ran again (its completion was not recorded)",
        )
        self.wait_idle(resumed, "Agent.when_idle")

    def test_a_turn_cut_before_its_completion_runs_again_first_after_a_resume(self) -> None:
        """Rule 4: a message whose turn never completed is queued again on resume, before
        anything else reaches the agent (here: a message sent after the resume)."""
        resume = self.resumer()
        agent, model = self.spawn()
        model.hold()
        cut = self.followup(agent)
        self.wait(model.entered(0), INBOX, "the turn starting")
        session_id = self.take_offline(agent)  # while the turn runs: no completion
        model.open()
        again = self.model()
        resumed = resume(session_id, again)
        later = self.followup(resumed)
        self.wait(again.entered(1), INBOX, "two turns of the resumed agent")
        seen = [message.text for message in again.messages[:2]]
        expect(
            seen == [cut.text, later.text],
            INBOX,
            f"after a resume the agent ran {seen}; expected the unfinished {cut.text!r} "
            f"again first, then {later.text!r}",
        )
        self.wait_idle(resumed, "Agent.when_idle")
