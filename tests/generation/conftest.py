"""Shared queries and personas for the offline backend tests."""

from __future__ import annotations

import pytest

from generation.offline_retrieval import DemoCorpusRetrieval
from kernel.backends import Document

# One realistic information need per demo cluster, with the ids of that cluster (8 papers each).
CLUSTER_QUERIES: dict[str, range] = {
    "How do night shifts affect nurses' sleep and patient safety?": range(1, 9),
    "What are the side effects and how long does protection from mRNA vaccines last?": range(9, 17),
    "How reliable are benchmarks and LLM judges for evaluating large language models?": range(17, 25),
    "Which automatic metrics agree with human judgements of summary quality?": range(25, 33),
    "How can farmers adapt crops to drought and climate change?": range(33, 41),
    "Which interventions improve children's early reading and literacy?": range(41, 49),
    "How can hospitals reduce antibiotic resistance?": range(49, 57),
    "How can cities reduce urban heat island effects?": range(57, 65),
    "Does remote patient monitoring at home improve outcomes?": range(65, 73),
    "How is reinforcement learning used to train robots?": range(73, 81),
}

NURSE = {
    "role": "practising nurse",
    "domain": "acute hospital care",
    "expertise": "experienced practitioner",
    "research_area": "",
    "use_case": "improve care on my ward",
}
RESEARCHER = {
    "role": "researcher",
    "domain": "epidemiology",
    "expertise": "expert",
    "research_area": "statistical methods for cohort studies",
    "use_case": "literature review for a grant",
}
STUDENT = {
    "role": "undergraduate student",
    "domain": "general studies",
    "expertise": "novice",
    "research_area": "",
    "use_case": "understand the basics for an essay",
}
TEACHER = {
    "role": "primary school teacher",
    "domain": "education",
    "expertise": "intermediate",
    "research_area": "",
    "use_case": "plan lessons for my classroom",
}
PERSONAS = {"nurse": NURSE, "researcher": RESEARCHER, "student": STUDENT, "teacher": TEACHER}


@pytest.fixture(scope="session")
def demo_retrieval() -> DemoCorpusRetrieval:
    return DemoCorpusRetrieval()


@pytest.fixture(scope="session")
def retrieved(demo_retrieval: DemoCorpusRetrieval) -> dict[str, list[Document]]:
    return {query: demo_retrieval.search(query, k=10) for query in CLUSTER_QUERIES}
