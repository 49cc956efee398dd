"""One step's decisions of vLLM v1's scheduler: who runs, how many tokens, who is preempted.

``BatchScheduler`` owns the waiting and running queues and the KV block pool and knows nothing of
time. Per step, like ``vllm/v1/core/sched/scheduler.py``:

1. Running requests first, in admission order: a decoding request gets 1 token, one still in
   prefill its next chunk (at most the remaining token budget). When its KV blocks cannot be
   grown, the lowest-precedence running request is preempted by recompute (FCFS: the last
   admitted, which is the latest arrival; priority: the largest ``(priority, arrival, id)``).
   A request that has to preempt itself ends this pass for the step.
2. Only if step 1 preempted nobody: admit waiting requests (FCFS order, or ``(priority, arrival,
   id)`` order) while ``len(running) < max_num_seqs``, budget remains and the first chunk's
   blocks are free; without chunked prefill a prompt that does not fit the budget waits. In
   priority mode a waiting request that cannot get a seat or blocks preempts running requests
   of strictly larger priority value (vLLM V0's priority preemption; v1 only preempts in step 1).

Preemption frees every block of the victim and puts it back at the front of the waiting queue
(FCFS) or into the priority heap; its generated tokens become part of the prompt it recomputes.
State advances when a step is planned (as vLLM's ``_update_after_schedule`` does); tokens are
handed out and finished requests freed when the step completes.
"""

from __future__ import annotations

import heapq
from collections import deque

from workers.engine.plan import DECODED, DONE, PARTIAL, PREFILLED, RUNNING, WAITING, Plan, Seq
from workers.engine.step import EngineConfig, EngineRequest, TokenEvent


class BatchScheduler:
    """Queues, KV blocks and per-step batching decisions (see the module docstring)."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.block_size = config.block_size
        self.total_blocks = config.num_blocks
        self.free_blocks = self.total_blocks
        self.priority_mode = config.scheduling == "priority"
        self.running: list[Seq] = []
        self.fifo: deque[Seq] = deque()
        self.heap: list[tuple[tuple[int, float, str, int], Seq]] = []
        self.seqs: dict[str, Seq] = {}
        self.num_preemptions = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self._order = 0
        self._steps = 0

    # queues -------------------------------------------------------------------------------
    @property
    def num_waiting(self) -> int:
        return len(self.heap) if self.priority_mode else len(self.fifo)

    def has_work(self) -> bool:
        return bool(self.seqs)

    def add(self, req: EngineRequest) -> None:
        cfg = self.config
        if req.id in self.seqs:
            raise ValueError(f"duplicate request id {req.id!r}")
        if req.n_in < 1 or req.n_out < 1:
            raise ValueError("n_in and n_out must be >= 1")
        capacity = self.total_blocks * self.block_size
        if req.n_in + req.n_out > capacity:
            raise ValueError(
                f"request needs {req.n_in + req.n_out} KV tokens, capacity is {capacity}"
            )
        if not cfg.enable_chunked_prefill and req.n_in + req.n_out - 1 > (
            cfg.max_num_batched_tokens
        ):
            raise ValueError("without chunked prefill, n_in + n_out - 1 must fit one step")
        self._order += 1
        seq = Seq(req, self._order)
        self.seqs[req.id] = seq
        self._enqueue(seq, front=False)

    def _enqueue(self, seq: Seq, front: bool) -> None:
        seq.state = WAITING
        if self.priority_mode:
            heapq.heappush(self.heap, (seq.key, seq))
        elif front:
            self.fifo.appendleft(seq)
        else:
            self.fifo.append(seq)

    def _head(self) -> Seq:
        return self.heap[0][1] if self.priority_mode else self.fifo[0]

    def _pop_head(self) -> Seq:
        return heapq.heappop(self.heap)[1] if self.priority_mode else self.fifo.popleft()

    def abort(self, req_id: str, plan: Plan | None) -> bool:
        seq = self.seqs.pop(req_id, None)
        if seq is None:
            return False
        if seq.state == RUNNING:
            self.running.remove(seq)
        elif self.priority_mode:
            self.heap = [e for e in self.heap if e[1] is not seq]
            heapq.heapify(self.heap)
        else:
            self.fifo.remove(seq)
        seq.state = DONE
        self.free_blocks += seq.blocks
        seq.blocks = 0
        if plan is not None and seq.last_step == plan.number:
            plan.aborted.add(req_id)
        return True

    # one step ------------------------------------------------------------------------------
    def plan(self) -> Plan:
        """Decide the next step and advance request state as if it had run."""
        self._steps += 1
        plan = Plan(self._steps)
        budget = self._schedule_running(plan, self.config.max_num_batched_tokens)
        if not plan.preempted:
            self._admit_waiting(plan, budget)
        return plan

    def _schedule_running(self, plan: Plan, budget: int) -> int:
        """Step 1 of the module docstring; returns the token budget left.

        Plain decodes (the hot path) are kept inline and their plan totals in locals, which
        are added to the plan before anything else may read or change it (preemptions).
        """
        running = self.running
        bs = self.block_size
        number = plan.number
        emit = plan.events.append  # `_unschedule` edits plan.events in place: stays valid
        finishing = plan.finishing
        seqs = ctx = 0  # plain decodes not yet added to plan.decode_seqs / decode_ctx
        i = 0
        while i < len(running) and budget > 0:
            s = running[i]
            computed = s.computed
            n = s.num_tokens - computed
            if n == 1 and s.generated:
                if computed >= s.blocks * bs:
                    if self.free_blocks < 1:
                        plan.decode_seqs += seqs
                        plan.decode_ctx += ctx
                        seqs = ctx = 0
                        kept = self._make_room(1, s, plan)
                        budget += plan.take_restored()
                        i = self._resume_index(i, plan)
                        if not kept:
                            break  # as vLLM: a request that preempts itself ends the pass
                    self.free_blocks -= 1
                    s.blocks += 1
                computed += 1
                s.computed = computed
                s.last_step = number
                s.last_n = 1
                s.last_kind = DECODED
                seqs += 1
                ctx += computed
                g = s.generated = s.generated + 1
                s.num_tokens += 1
                if g == s.n_out:
                    emit(TokenEvent(s.id, 1, False, True))
                    finishing.append(s)
                else:
                    emit(s.tick)
                budget -= 1
                i += 1
                continue
            n = min(n, budget)
            need = -(-(computed + n) // bs) - s.blocks
            if need > self.free_blocks:
                plan.decode_seqs += seqs
                plan.decode_ctx += ctx
                seqs = ctx = 0
                kept = self._make_room(need, s, plan)
                budget += plan.take_restored()
                i = self._resume_index(i, plan)
                if not kept:
                    break
            budget = self._run_chunk(s, n, need, plan, budget)
            i += 1
        plan.decode_seqs += seqs
        plan.decode_ctx += ctx
        return budget

    def _resume_index(self, i: int, plan: Plan) -> int:
        """Where the running loop continues after preemptions: past what is scheduled already.

        FCFS victims are always at the tail, so ``i`` stands; priority victims may sit before it.
        """
        if not self.priority_mode:
            return i
        return sum(1 for r in self.running if r.last_step == plan.number)

    def _make_room(self, need: int, s: Seq, plan: Plan) -> bool:
        """Preempt lowest-precedence running requests until ``need`` blocks are free.

        Returns False when ``s`` itself was preempted.
        """
        while need > self.free_blocks:
            victim = self.running[-1]
            if self.priority_mode:
                victim = max(self.running, key=_precedence)
            self._preempt(victim, plan)
            if victim is s:
                return False
        return True

    def _admit_waiting(self, plan: Plan, budget: int) -> None:
        cfg = self.config
        while budget > 0 and self.num_waiting:
            s = self._head()
            if len(self.running) >= cfg.max_num_seqs and not self._evict_for(s, 0, plan):
                return
            budget += plan.take_restored()
            n = s.num_tokens
            if n > budget:
                if not cfg.enable_chunked_prefill:
                    return
                n = budget
            need = -(-n // self.block_size)
            if need > self.free_blocks and not self._evict_for(s, need, plan):
                return
            budget += plan.take_restored()
            self._pop_head()
            s.state = RUNNING
            self.running.append(s)
            budget = self._run_chunk(s, n, need, plan, budget)

    def _evict_for(self, s: Seq, need: int, plan: Plan) -> bool:
        """Priority mode: preempt running requests of larger priority value to seat ``s``.

        ``need`` = 0 asks for a seat, otherwise for that many free blocks. Nothing is preempted
        unless the eligible victims together can satisfy the request.
        """
        if not self.priority_mode:
            return False
        victims = sorted((r for r in self.running if r.priority > s.priority), key=_precedence)
        if not victims:
            return False
        if need == 0:
            self._preempt(victims[-1], plan)
            return True
        if self.free_blocks + sum(v.blocks for v in victims) < need:
            return False
        while need > self.free_blocks:
            self._preempt(victims.pop(), plan)
        return True

    def _run_chunk(self, s: Seq, n: int, need: int, plan: Plan, budget: int) -> int:
        """Schedule ``n`` prompt tokens of ``s`` (allocating ``need`` blocks); returns budget."""
        self.free_blocks -= need
        s.blocks += need
        s.computed += n
        s.last_step = plan.number
        s.last_n = n
        plan.prefill_tokens += n
        if s.computed < s.num_tokens:
            s.last_kind = PARTIAL
            return budget - n
        s.last_kind = PREFILLED
        g = s.generated = s.generated + 1
        s.num_tokens += 1
        if g == 1:
            plan.firsts.append(s)
        if g == s.n_out:
            plan.finishing.append(s)
        if g == 1 or g == s.n_out:
            plan.events.append(TokenEvent(s.id, 1, g == 1, g == s.n_out))
        else:
            plan.events.append(s.tick)
        return budget - n

    def _preempt(self, victim: Seq, plan: Plan) -> None:
        if victim.last_step == plan.number:
            self._unschedule(victim, plan)
        self.running.remove(victim)
        self.free_blocks += victim.blocks
        victim.blocks = 0
        victim.computed = 0
        victim.preemptions += 1
        self.num_preemptions += 1
        plan.preempted.append(victim.id)
        self._enqueue(victim, front=True)

    def _unschedule(self, s: Seq, plan: Plan) -> None:
        """Take back what ``s`` was given earlier in this plan (priority-mode victims)."""
        s.last_step = -1
        s.computed -= s.last_n
        plan.restored += s.last_n
        if s.last_kind == DECODED:
            plan.decode_seqs -= 1
            plan.decode_ctx -= s.computed + 1
        else:
            plan.prefill_tokens -= s.last_n
        if s.last_kind != PARTIAL:
            s.generated -= 1
            s.num_tokens -= 1
            # in place: the running loop holds an alias of plan.events
            plan.events[:] = [e for e in plan.events if e.req_id != s.id]
            plan.finishing[:] = [f for f in plan.finishing if f is not s]
            plan.firsts[:] = [f for f in plan.firsts if f is not s]

    def complete(self, plan: Plan) -> tuple[TokenEvent, ...]:
        """The step has run: hand out its tokens and free the requests it finished."""
        events = plan.events
        if plan.aborted:
            events = [e for e in events if e.req_id not in plan.aborted]
        for s in plan.firsts:
            if s.state == RUNNING:
                self.prompt_tokens_total += s.n_in
        for s in plan.finishing:
            if s.state == RUNNING:
                s.state = DONE
                self.running.remove(s)
                self.free_blocks += s.blocks
                s.blocks = 0
                del self.seqs[s.id]
        self.generation_tokens_total += len(events)
        return tuple(events)


def _precedence(s: Seq) -> tuple[int, float, str, int]:
    return s.key
