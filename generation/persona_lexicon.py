"""The persona lexicon: what kind of reader a persona describes, and which words that reader looks for.

The extractive summariser turns a participant's persona (role, domain, expertise, ...) into
:class:`PersonaTerms`: the persona's own words, the cue words of the reader roles it matches,
and whether it asks for plain language. Plain Python, no Django.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kernel.text import index_terms, stem, tokenize

__all__ = ["ROLE_LEXICON", "PersonaTerms"]

# Role cues: if any trigger occurs in the persona, its cue words join the persona vector.
# They name what that kind of reader looks for in an abstract, not the topic.
ROLE_LEXICON: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "clinician": (
        tuple(
            "nurse nursing clinician clinical doctor physician midwife pharmacist paramedic gp "
            "therapist ward hospital".split()
        ),
        tuple(
            "patient patients care clinical practice staff ward wards nurses hospital implications bedside "
            "workload safety guidance managers shifts units clinicians".split()
        ),
    ),
    "researcher": (
        tuple("researcher research scientist phd postdoc academic lecturer professor analyst".split()),
        tuple(
            "method methods model models dataset statistically baseline baselines significant randomised "
            "randomized cohort regression confidence interval sample trial evaluation benchmark estimate "
            "adjusted controlled ablation participants".split()
        ),
    ),
    "student": (
        tuple("student undergraduate learner pupil novice beginner freshman layperson newcomer".split()),
        tuple(
            "introduce introduces overview basics basic means refers simple simply called known understand "
            "example everyday background idea".split()
        ),
    ),
    "teacher": (
        tuple("teacher teaching educator instructor tutor school headteacher classroom".split()),
        tuple(
            "classroom classrooms pupils teachers lesson lessons school schools children instruction reading "
            "minutes weekly staff practical implications".split()
        ),
    ),
    "policymaker": (
        tuple(
            "policy policymaker manager administrator official planner government council commissioner director".split()
        ),
        tuple(
            "cost costs policy policies implementation programme program budget scale decision planners "
            "investment guidelines regional national municipal savings".split()
        ),
    ),
    "engineer": (
        tuple("engineer developer programmer industry startup product deploy software".split()),
        tuple(
            "deploy deployment system implementation latency compute code hardware open-source production "
            "cost practical real-world robot pipeline tool released".split()
        ),
    ),
    "farmer": (
        tuple("farmer grower agronomist extension agriculture agricultural smallholder".split()),
        tuple(
            "farmers farm farms yield yields crop crops planting irrigation seed harvest income advice season "
            "fields".split()
        ),
    ),
    "journalist": (
        tuple("journalist reporter writer communicator editor".split()),
        tuple("public people findings means everyday impact risk simple communities".split()),
    ),
}

_PLAIN_EXPERTISE = ("novice", "beginner", "none", "no prior", "layperson", "lay", "introductory", "little", "new to")


def _expertise_is_plain(expertise: str) -> bool:
    text = expertise.lower()
    return any(re.search(rf"\b{re.escape(cue)}\b", text) for cue in _PLAIN_EXPERTISE)


@dataclass(frozen=True)
class PersonaTerms:
    """The persona as the summariser uses it: weighted stemmed terms, matched roles, plain-language flag."""

    terms: Mapping[str, float]
    roles: tuple[str, ...]
    plain: bool

    @classmethod
    def from_mapping(cls, persona: Mapping[str, str] | None) -> PersonaTerms | None:
        if not persona:
            return None
        # "not given" is the platform's placeholder for an unanswered question, not a preference.
        values = {
            str(key).lower(): str(value or "")
            for key, value in persona.items()
            if str(value or "").strip().lower() not in {"not given", "n/a", "-"}
        }
        text = " ".join(values.values())
        raw_words = set(tokenize(text))
        stems = set(index_terms(text))
        roles = tuple(
            role
            for role, (triggers, _cues) in ROLE_LEXICON.items()
            if any(t in raw_words or stem(t) in stems for t in triggers)
        )
        weights: dict[str, float] = {}
        # Profile words are what this reader literally cares about; role cues generalise them.
        for token in index_terms(text):
            weights[token] = weights.get(token, 0.0) + 1.0
        for role in roles:
            for cue in ROLE_LEXICON[role][1]:
                for token in index_terms(cue):
                    weights[token] = weights.get(token, 0.0) + 0.75
        plain = _expertise_is_plain(values.get("expertise", ""))
        if not weights and not plain:
            return None
        return cls(terms=dict(weights), roles=roles, plain=plain)
