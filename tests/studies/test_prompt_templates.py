"""A prompt template is text an owner writes: its placeholders are a closed set of bare names, nothing else is
followed or evaluated (docs/permissions.md, "Nothing a user writes is evaluated")."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from kernel.backends import Document
from studies.models import PromptTemplate
from studies.prompts import TemplateError, check_template, render_prompt

DOCS = [Document(external_id="W1", title="Metrics for summaries", abstract="We compare ROUGE and humans.", year=2021)]
PERSONA = {"role": "nurse", "domain": "health", "expertise": "novice", "research_area": "", "use_case": "teaching"}


def test_placeholders_and_literal_braces_are_filled_in():
    prompt = render_prompt(
        body='Q: {query}\n{persona_block}\nJSON like {{"a": 1}}\n{documents}',
        persona_block="Role {role}; area {research_area}.",
        query="Which metric?",
        documents=DOCS,
        persona=PERSONA,
    )
    assert prompt.startswith("Q: Which metric?\nRole nurse; area not given.\n")
    assert 'JSON like {"a": 1}' in prompt
    assert "[1] Metrics for summaries (2021)\nWe compare ROUGE and humans." in prompt


@pytest.mark.parametrize(
    "body",
    [
        "{query.__class__.__mro__}",
        "{documents[0]}",
        "{query!r}",
        "{query:>99999999}",
        "{persona_block.__init__.__globals__}",
        "{settings}",
        "{0}",
        "{}",
    ],
)
def test_anything_but_a_bare_placeholder_is_refused_naming_it(body):
    with pytest.raises(TemplateError, match="is not a placeholder") as caught:
        render_prompt(body=body, persona_block="", query="q", documents=DOCS, persona=None)
    assert "{query}, {documents}, {persona_block}" in str(caught.value)
    assert check_template(body=body, persona_block="")["body"] == str(caught.value)


def test_the_persona_block_has_its_own_names():
    assert check_template(body="{query}", persona_block="{role} {use_case}") == {}
    problems = check_template(body="{query}", persona_block="{query} {role.upper}")
    assert set(problems) == {"persona_block"} and "{query} is not a placeholder" in problems["persona_block"]


def test_a_lone_brace_says_how_to_write_one():
    with pytest.raises(TemplateError, match=r"write a literal brace as \{\{ or \}\}"):
        render_prompt(body="Answer {query} {", persona_block="", query="q", documents=DOCS, persona=None)


@pytest.mark.django_db
def test_the_admin_refuses_such_a_template_with_a_form_error_and_saves_nothing():
    admin = get_user_model().objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(admin)
    form = {"name": "leaky", "version": "1", "body": "{query} {documents.__class__}", "persona_block": "{role!r}"}
    response = client.post("/admin/studies/prompttemplate/add/", form)
    page = response.content.decode()
    assert response.status_code == 200
    assert "{documents.__class__} is not a placeholder" in page
    assert "{role!r} is not a placeholder" in page
    assert not PromptTemplate.objects.filter(name="leaky").exists()
    form.update(body="{query} {documents}", persona_block="{role}")
    assert client.post("/admin/studies/prompttemplate/add/", form).status_code == 302
    assert PromptTemplate.objects.filter(name="leaky", version=1).exists()
