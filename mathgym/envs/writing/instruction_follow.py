"""InstructionFollow-v0: write a response that meets verifiable constraints (single turn).

Each prompt is a writing request ("Write a short story about a lighthouse.") with constraints
drawn from :mod:`mathgym.envs.writing.instruction_constraints` (length, keywords, format, case, start
and end, punctuation...). The reward is the share of constraints met, counted from what a reply
ignoring the request meets (:func:`verdict`); ``reward_breakdown`` has one entry per constraint
family (1.0 met, 0.0 not). Every prompt is kept only when the built-in writer
(:func:`write_response`, the expert) meets all of its constraints, so each task is solvable, and
when a reply ignoring the request fails one, so none is solved by doing nothing.

A reasoning model's constraints are checked on its answer, the text after its thinking
(:func:`~mathgym.rewards.extract.answer_after_thinking`): a chain of thought is not the
response the request asked for ("at most 50 words", "all lowercase", "end with ..."). A reply
whose thinking never closed gave no answer: it meets no constraint (``unparseable``, 0), however
much of its thinking would (checking the thinking would pay a policy for never answering).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mathgym.core import Judgement, Task, TextEnv
from mathgym.envs.writing.ifeval_data import IFEvalRecord, answer_part, load_ifeval
from mathgym.envs.writing.instruction_checks import RESPONSE_SEPARATOR, has_word
from mathgym.envs.writing.instruction_constraints import FAMILIES, Constraint, draw_constraints
from mathgym.errors import ConfigError, require_option
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking
from mathgym.rewards.no_op import credit_beyond
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Follow every instruction of the request exactly."
GENRES = (
    "a short story",
    "a poem",
    "an email to a friend",
    "a product description",
    "a short blog post",
    "a letter",
    "a short speech",
    "a diary entry",
)
TOPICS = (
    "a lighthouse",
    "the ocean",
    "coffee",
    "winter mornings",
    "a city park",
    "robots",
    "gardening",
    "the moon",
    "a train trip",
    "music",
    "friendship",
    "rain",
)
#: Body sentences of the expert's responses ({t}: the topic). No commas, no capitals but the first letter.
SENTENCES = (
    "I keep thinking about {t}.",
    "There is always more to learn about {t}.",
    "Many people have a story about {t}.",
    "Some days {t} feels new again.",
    "It helps to be patient with {t}.",
    "A small detail can change how we see {t}.",
    "My friends often ask me about {t}.",
    "The best part of {t} is the calm it brings.",
    "We can all share what we love about {t}.",
    "Nobody forgets the first time they noticed {t}.",
    "It is easy to smile when we talk about {t}.",
    "Each season gives {t} another mood.",
)
CAPITAL_WORDS = ("NOTE", "THIS", "CLEARLY", "MATTERS", "TODAY")
LETTER_WORDS = {
    "e": "evergreen",
    "a": "banana",
    "o": "cocoon",
    "t": "tattoo",
    "n": "nonsense",
    "s": "successes",
    "z": "zebra",
    "q": "quiet",
    "j": "jolly",
    "x": "xenon",
}
LEVELS = (1, 2, 3, 4, 5)
#: Replies that ignore the request, in each case: what they meet ("do not use the words ...",
#: "at most 50 words", "all lowercase") holds without doing anything, so it earns nothing.
NO_OP_REPLIES = ("I don't know.", "i don't know.", "I DON'T KNOW.")


def met_by_doing_nothing(check: Callable[[str], Mapping[str, bool]]) -> frozenset[str]:
    """The constraints (by name) that one of :data:`NO_OP_REPLIES` meets, ``check`` giving each one's verdicts."""
    return frozenset(name for reply in NO_OP_REPLIES for name, met in check(reply).items() if met)


def verdict(met: Mapping[str, bool], free: frozenset[str]) -> tuple[float, Status]:
    """Reward and status of the constraints ``met``: those a reply doing nothing meets (``free``) must
    hold but earn nothing (:func:`~mathgym.rewards.no_op.credit_beyond`)."""
    share = credit_beyond(sum(met.values()), len(met), len(free & met.keys()))
    return share, Status.CORRECT if share == 1.0 else Status.PARTIAL if share > 0 else Status.WRONG


def _sentences(constraints: Mapping[str, Constraint], topic: str, count: int, offset: int) -> list[str]:
    """``count`` body sentences on ``topic``, skipping any that would break a word or letter limit."""
    banned: set[str] = set()
    if "forbidden_words" in constraints:
        banned |= set(constraints["forbidden_words"].options["forbidden"])
    limit = constraints.get("letter_frequency")
    letter = limit.options["letter"] if limit is not None and limit.options["relation"] == "at most" else None
    usable = [
        s
        for s in SENTENCES
        if not (letter and letter in s.format(t=topic).lower()) and not banned & set(s.lower().split())
    ]
    usable = usable or ["I like {t}."]
    return [usable[(offset + i) % len(usable)].format(t=topic) for i in range(count)]


def _extras(constraints: Mapping[str, Constraint]) -> list[str]:
    """Sentences that place keywords, letters, capital words, highlights, placeholders and verdicts."""
    out = []
    if "constrained_answer" in constraints:
        out.append("My answer is yes.")
    if "include_keywords" in constraints:
        first, second = constraints["include_keywords"].options["keywords"]
        out.append(f"Think of the {first} and the {second}.")
    if "keyword_frequency" in constraints:
        word = constraints["keyword_frequency"].options["keyword"]
        out += [f"The {word} stays with me."] * constraints["keyword_frequency"].options["n"]
    limit = constraints.get("letter_frequency")
    if limit is not None and limit.options["relation"] == "at least":
        word = LETTER_WORDS[limit.options["letter"]]
        out.append(
            " ".join([word] * math.ceil(limit.options["n"] / word.count(limit.options["letter"]))).capitalize() + "."
        )
    capitals = constraints.get("capital_words")
    if capitals is not None and capitals.options["relation"] == "at least":
        out.append(" ".join(CAPITAL_WORDS[: capitals.options["n"]]) + ".")
    if "highlighted_sections" in constraints:
        out += [f"Here is *key idea {i + 1}* for you." for i in range(constraints["highlighted_sections"].options["n"])]
    if "placeholders" in constraints:
        out.append(
            "Write to me at "
            + " and ".join(f"[place {i + 1}]" for i in range(constraints["placeholders"].options["n"]))
            + "."
        )
    return out


def _layout(constraints: Mapping[str, Constraint], sentences: list[str], topic: str) -> str:
    """Arrange the sentences as the layout constraint asks (paragraphs, bullets, sections, JSON, two responses)."""
    if "bullet_list" in constraints:
        n = constraints["bullet_list"].options["n"]
        head, items = sentences[: max(0, len(sentences) - n)], sentences[-n:]
        while len(items) < n:
            items.append(f"One more idea about {topic}.")
        return ("\n\n".join([" ".join(head)]) + "\n\n" if head else "") + "\n".join(f"* {s}" for s in items)
    for kind in ("paragraph_count", "first_word", "sections"):
        if kind in constraints:
            options = constraints[kind].options
            n = options["n"]
            groups = [sentences[i::n] or [f"More about {topic}."] for i in range(n)]
            if kind == "first_word":
                nth = options["nth"] - 1
                groups[nth] = [
                    options["word"].capitalize() + " " + groups[nth][0][0].lower() + groups[nth][0][1:],
                    *groups[nth][1:],
                ]
            blocks = [" ".join(g) for g in groups]
            if kind == "sections":
                blocks = [f"{options['marker']} {i + 1}\n{b}" for i, b in enumerate(blocks)]
            return "\n\n".join(blocks)
    text = " ".join(sentences)
    if "json_format" in constraints:
        return json.dumps({"response": text})
    if "two_responses" in constraints:
        return f"{text}\n{RESPONSE_SEPARATOR}\n{' '.join(reversed(sentences))} That is my second take."
    return text


def compose(request: str, constraints: Sequence[Constraint], topic: str, body: int, offset: int = 0) -> str:
    """The expert's response with ``body`` body sentences (before starts, ends and case)."""
    by_kind = {c.kind: c for c in constraints}
    text = _layout(by_kind, _extras(by_kind) + _sentences(by_kind, topic, body, offset), topic)
    if "title" in by_kind:
        text = f"<<Notes on {topic}>>\n\n{text}"
    if "start_phrase" in by_kind:
        text = f"{by_kind['start_phrase'].options['phrase']} {text}"
    if "repeat_request" in by_kind:
        text = f"{request}\n\n{text}"
    if "end_phrase" in by_kind:
        text = f"{text} {by_kind['end_phrase'].options['phrase']}"
    if "postscript" in by_kind:
        text = f"{text}\n\nP.S. I hope you enjoy it."
    if "quotation" in by_kind:
        text = f'"{text}"'
    if "lowercase" in by_kind:
        text = text.lower()
    if "uppercase" in by_kind:
        text = text.upper()
    return text


def write_response(request: str, constraints: Sequence[Constraint], topic: str, offset: int = 0) -> str | None:
    """A response meeting every constraint: the fewest body sentences that work, or ``None``."""
    for body in range(1, 25):
        text = compose(request, constraints, topic, body, offset)
        if all(c.check(text, request) for c in constraints):
            return text
    return None


def _free(constraints: Sequence[Constraint], request: str) -> frozenset[str]:
    """The kinds of ``constraints`` that a reply ignoring ``request`` meets."""
    return met_by_doing_nothing(lambda reply: {c.kind: c.check(reply, request) for c in constraints})


class InstructionFollowEnv(TextEnv):
    """Answer a writing request while meeting every listed constraint (IFEval-style, verifiable).

    Reward: 1.0 when every constraint is met; otherwise the share of the constraints that a reply
    ignoring the request (:data:`NO_OP_REPLIES`, "I don't know.") fails that this one meets, each
    constraint the no-op meets ("do not use the words ...", "at most 50 words") and this one fails
    taking one back (:func:`verdict`): a prohibition must hold but earns nothing
    (``reward_breakdown``: 1.0 or 0.0 per constraint family, as met); status ``correct``,
    ``partial`` (a positive share) or ``wrong``.
    A response without a single word is ``unparseable`` and earns 0 (it would otherwise meet
    "at most N words" or "no commas" for free). A reasoning model's reply is checked on its
    answer, after its thinking; a reply whose thinking never closed is ``unparseable`` too.
    Single turn. ``info["constraints"]`` lists each instruction with whether it was met.

    Args:
        difficulty: Level 0-4: 1 to 5 constraints per prompt.
        dataset: An IFEval-layout JSONL file (``prompt``, ``instruction_id_list``, ``kwargs``) to
            take the prompts from instead of drawing them; graded by IFEval's strict checks
            (:mod:`mathgym.envs.writing.ifeval_data`). open-instruct's layouts (RLVR-IFeval's
            ``ground_truth`` with a ``func_name``, checked as open-instruct checks it; or one with
            ``instruction_id`` and ``kwargs``) are read too. Such a task has no reference answer.
        ifeval_mode: ``"strict"`` (default) or ``"loose"``: IFEval's two evaluations of a
            ``dataset`` prompt (loose also tries the response without its first or last line
            and without ``*``).
        num_constraints: Constraints per prompt (1-8), over the level's.
        families: Constraint families to draw from (default: every one in
            :data:`~mathgym.envs.writing.instruction_constraints.FAMILIES`).
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    reward_only_options = frozenset({"ifeval_mode"})

    def __init__(
        self,
        difficulty: int = 1,
        dataset: str | None = None,
        ifeval_mode: str = "strict",
        num_constraints: int | None = None,
        families: Sequence[str] | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=1, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        if isinstance(difficulty, bool) or not isinstance(difficulty, int) or not 0 <= difficulty < len(LEVELS):
            raise ConfigError(
                f"difficulty={difficulty!r} is not allowed; choose an integer from 0 to {len(LEVELS) - 1}."
            )
        count = LEVELS[difficulty] if num_constraints is None else num_constraints
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 8:
            raise ConfigError(f"num_constraints={count!r} is not allowed; choose an integer from 1 to 8.")
        names = tuple(FAMILIES) if families is None else tuple(families)
        unknown = [name for name in names if name not in FAMILIES]
        if unknown or not names:
            raise ConfigError(
                f"families={list(names)!r}: unknown {unknown or 'none given'}; choose among {', '.join(FAMILIES)}."
            )
        self.difficulty, self.num_constraints, self.families = difficulty, count, names
        require_option("ifeval_mode", ifeval_mode, ("strict", "loose"))
        self.dataset, self.ifeval_mode = dataset, ifeval_mode
        self._records = load_ifeval(dataset) if dataset is not None else ()

    @property
    def num_tasks(self) -> int | None:
        """Number of prompts of the data set, or ``None`` for generated prompts."""
        return len(self._records) or None

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        if self._records:
            record = self._records[self._task_index(options, len(self._records))]
            return Task(f"ifeval/{record.key}", record.prompt, "", {"record": record})
        if "task_index" in options:
            raise ConfigError("InstructionFollow-v0 draws prompts by seed; options['task_index'] is not supported (it is with dataset=).")
        for _ in range(200):
            topic = TOPICS[int(self.np_random.integers(len(TOPICS)))]
            request = f"Write {GENRES[int(self.np_random.integers(len(GENRES)))]} about {topic}."
            constraints = draw_constraints(self.np_random, self.num_constraints, self.families)
            offset = int(self.np_random.integers(len(SENTENCES)))
            gold = write_response(request, constraints, topic, offset)
            # Kept when solvable, and when a reply ignoring the request fails a constraint (else it would earn 1).
            if gold is not None and len(constraints) == self.num_constraints and len(_free(constraints, request)) < len(constraints):
                break
        else:
            raise ConfigError(
                f"could not draw {self.num_constraints} compatible constraints from families {list(self.families)} that a "
                f"reply ignoring the request ({NO_OP_REPLIES[0]!r}) does not meet all of; add a family such as include_keywords."
            )
        if len(constraints) == 1:
            prompt = f"{request} {constraints[0].text}"
        else:
            rules = "\n".join(f"{i + 1}. {c.text}" for i, c in enumerate(constraints))
            prompt = f"{request}\nYour response must follow these rules:\n{rules}"
        digest = hashlib.sha1(prompt.encode()).hexdigest()[:12]
        meta = {"request": request, "constraints": tuple(constraints)}
        return Task(f"ifollow-{len(constraints)}-{digest}", prompt, gold, meta)

    def _judge(self, action: str) -> Judgement:
        answer = answer_after_thinking(action) or ""  # never closed: no answer, as empty as none
        if "record" in self.task.metadata:
            return self._judge_record(answer, self.task.metadata["record"])
        request, constraints = self.task.metadata["request"], self.task.metadata["constraints"]
        if not has_word(answer):  # an empty answer would meet "at most N words", "no commas"...: it earns nothing
            listing = [{"kind": c.kind, "instruction": c.text, "met": False} for c in constraints]
            return Judgement(
                0.0,
                Status.UNPARSEABLE,
                True,
                reward_breakdown={c.kind: 0.0 for c in constraints},
                info={"constraints": listing},
            )
        met = {c.kind: c.check(answer, request) for c in constraints}
        share, status = verdict(met, _free(constraints, request))
        listing = [{"kind": c.kind, "instruction": c.text, "met": met[c.kind]} for c in constraints]
        return Judgement(
            share,
            status,
            True,
            reward_breakdown={k: float(v) for k, v in met.items()},
            correct=share == 1.0,
            info={"constraints": listing},
        )

    def _judge_record(self, answer: str, record: IFEvalRecord) -> Judgement:
        """An IFEval prompt: the share of its instructions the answer follows (IFEval's strict
        checks), counted from what a reply ignoring the request follows (:func:`verdict`); an
        answer without a word follows none (it would otherwise meet "no comma" for free)."""
        empty = not has_word(answer_part(answer) if record.answer_only else answer)
        loose = self.ifeval_mode == "loose"
        met = {name: False for name, _ in record.instructions} if empty else record.check(answer, loose=loose)
        share, status = verdict(met, met_by_doing_nothing(lambda reply: record.check(reply, loose=loose)))
        status = Status.UNPARSEABLE if empty else status
        listing = [{"kind": name, "instruction": name, "met": ok} for name, ok in met.items()]
        return Judgement(share, status, True, reward_breakdown={k: float(v) for k, v in met.items()}, correct=share == 1.0,
                         info={"constraints": listing})

    def expert_action(self) -> str | None:
        """A response meeting every constraint (the task's reference answer); ``None`` for a
        data set's prompt, which has none."""
        return self.task.answer or None
