"""Comparison and yes/no questions (issue 33): a Hard variant removes what decides the comparison for the entity
it replaces, or that slot yields no variant (counted in the drop log). The fixture is written here in HotpotQA's
layout with the issue's three shapes (ancestors kept under the other title, both birth dates, the member lists)
and a yes/no question; each Hard variant built from it is checked by plain string tests written for these records
alone, sharing no code with the builder's rule."""
import json

import pytest

from mmbench.builders.multi_source_reasoning import build
from mmbench.builders.sources import sample_reasoning as sr
from mmbench.data.documents import Text

DOG = {"_id": "dog", "type": "comparison", "level": "hard",
       "question": "Which dog's ancestors include Gordon and Irish Setters: the Manchester Terrier or the Scotch "
                   "Collie?", "answer": "Scotch Collie",
       "supporting_facts": [["Manchester Terrier", 0], ["Scotch Collie", 0], ["Scotch Collie", 2]],
       "context": [["Manchester Terrier", ["The Manchester Terrier is a breed of dog of the smooth-haired terrier "
                                           "type.", "The breed was developed from the Whippet and a rat-killing "
                                           "terrier of the northern mill towns."]],
                   ["Scotch Collie", ["The Scotch Collie is a landrace breed of dog which originated from the "
                                      "highland regions of the north.", "The breed consisted of both long and short "
                                      "haired varieties.", "Other ancestors include the Gordon and Irish Setters."]],
                   ["Pellam Moor", ["Pellam Moor is an upland heath crossed by an old drove road."]]]}
OLDER = {"_id": "older", "type": "comparison", "level": "medium",
         "question": "Who is older, Annie Morton or Terry Richardson?", "answer": "Terry Richardson",
         "supporting_facts": [["Annie Morton", 0], ["Terry Richardson", 0]],
         "context": [["Annie Morton", ["Annie Morton (born October 8, 1970) is a model from the eastern coast.",
                                       "She has appeared on the covers of several fashion magazines.",
                                       "Morton, born in 1970, began modelling at eighteen."]],
                     ["Terry Richardson", ["Terrence Richardson (born August 14, 1965) is a fashion and portrait "
                                           "photographer.", "He has shot advertising campaigns for several houses.",
                                           "Richardson was born in 1965 in a coastal city."]],
                     ["Harrow Lane", ["Harrow Lane is a quiet street of brick terraces."]]]}
BAND = {"_id": "band", "type": "comparison", "level": "medium",
        "question": "Which band had more members, Velvet Harrows or The Quillmen?", "answer": "Velvet Harrows",
        "supporting_facts": [["Velvet Harrows", 1], ["The Quillmen", 1]],
        "context": [["Velvet Harrows", ["Velvet Harrows is a rock group formed in Leeds.",
                                        "The lineup is Ann Lowe, Bo Dale, Cy Marsh, Di Pratt, Ed Stone and Flo Hart.",
                                        "All six members write songs."]],
                    ["The Quillmen", ["The Quillmen are an indie group from Cork.",
                                      "The lineup is Gus Penn, Hal Ward and Ivo Nash.",
                                      "The three members met at school."]],
                    ["Ostler Bridge", ["Ostler Bridge carries a lane over the canal."]]]}
NATION = {"_id": "nation", "type": "comparison", "level": "easy",
          "question": "Were Scott Derrickson and Ed Wood of the same nationality?", "answer": "yes",
          "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
          "context": [["Scott Derrickson", ["Scott Derrickson is an American director and screenwriter.",
                                            "Derrickson, an American, is known for horror films."]],
                      ["Ed Wood", ["Edward Davis Wood Jr. was an American filmmaker, actor and writer.",
                                   "Wood, an American, made low-budget films."]],
                      ["Tamsin Reach", ["Tamsin Reach is a shingle beach below chalk cliffs."]]]}
FIXTURE = [DOG, OLDER, BAND, NATION]


def _answerable(rid: str, text: str) -> bool:
    """Whether `text` still decides the comparison, by the facts written into the fixture above."""
    if rid == "dog":        # one positive statement decides: the setters as ancestors
        return "Gordon and Irish Setters" in text
    if rid == "older":      # both birth years are needed
        return "1970" in text and "1965" in text
    if rid == "band":       # both sizes: the lineup or the count of each band
        return ("Ann Lowe" in text or "six members" in text) and ("Gus Penn" in text or "three members" in text)
    return "American" in text.replace("Wood, an American", "").replace("an American filmmaker", "") \
        and ("an American filmmaker" in text or "Wood, an American" in text)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("msr-cmp")
    hp = tmp / "hotpot.json"
    hp.write_text(json.dumps(FIXTURE + sr.hotpot_records(0, 12)))
    return build("real", tmp / "out", hotpotqa=str(hp), datasets=("hotpotqa",), lengths=(8192,),
                 queries_per_dataset=16, candidates_per_query=4, progress=False)


def test_the_string_test_sees_the_facts_in_the_undamaged_contexts(built):
    easy = {c.meta["record_id"]: c for c in built.candidates if c.meta["difficulty"] == "easy"}
    for rec in FIXTURE:
        text = " ".join(s.text for s in easy[rec["_id"]].segments if isinstance(s, Text))
        assert _answerable(rec["_id"], text), rec["_id"]


def test_no_hard_variant_of_a_comparison_keeps_the_deciding_fact(built):
    assert built.manifest["validity"]["ok"]
    kept = {q.meta["record_id"] for q in built.queries}
    assert {r["_id"] for r in FIXTURE} <= kept
    seen = set()
    for c in built.candidates:
        rid = c.meta["record_id"]
        if c.meta["difficulty"] == "hard" and rid in {r["_id"] for r in FIXTURE}:
            seen.add(rid)
            text = " ".join(s.text for s in c.segments if isinstance(s, Text))
            assert not _answerable(rid, text), (c.id, c.meta["provenance"]["which"])
    assert seen == {"dog", "older", "band", "nation"}      # each shape still yields Hard variants


def test_slots_that_cannot_be_repaired_are_counted_per_reason(built):
    from mmbench.builders.parts.evidence_chain import ChainUnit, chain_leaks

    units = [ChainUnit("Annie Morton (born October 8, 1970) is a model.", None, "Annie Morton", True),
             ChainUnit("Morton, born in 1970, began modelling.", None, "Annie Morton"),
             ChainUnit("In 1988 she moved to Paris.", None, "Annie Morton"),
             ChainUnit("She signed with an agency in 1990.", None, "Annie Morton"),
             ChainUnit("Terrence Richardson (born August 14, 1965) is a photographer.", None, "Terry Richardson", True)]
    blank = [ChainUnit("") if k == 0 else u for k, u in enumerate(units)]
    leaks = chain_leaks(units, blank, [0], OLDER["question"], OLDER["answer"])
    assert {lk.unit for lk in leaks} == {1, 2, 3} and all(lk.reason.startswith("comparison decided") for lk in leaks)
    from mmbench.builders.parts.hard_variants import plan_variants
    from mmbench.builders.sources.hotpotqa import hotpot_record
    from mmbench.data.tokens import UnifiedTokenCounter

    rec = json.loads(json.dumps(OLDER))
    rec["context"][0][1] += ["In 1988 she moved to Paris.", "She signed with an agency in 1990."]
    plans, dropped = plan_variants(hotpot_record(rec, UnifiedTokenCounter.default()), 0)
    assert dropped.get("first") == "comparison still decided by what remains", (plans, dropped)
    reasons = built.manifest["dropped"]["hard_variants"]["dropped"]
    assert all(not k.startswith("comparison decided") for k in reasons)    # counted under the plain reason


def test_the_validity_report_counts_hard_variants_per_question_type(built):
    got = built.manifest["validity"]["breakdown"]
    hard = [c for c in built.candidates if c.meta["difficulty"] == "hard"]
    yes_no = sum(1 for c in hard if c.meta["record_id"] == "nation")
    comparison = sum(1 for c in hard if c.meta["record_id"] in ("dog", "older", "band")
                     or (c.meta["record_id"].startswith("sample-hp-") and int(c.meta["record_id"][-3:]) % 7 == 2))
    assert got["hard_variants_by_question_type"] == {
        "hotpotqa/comparison": comparison, "hotpotqa/other": len(hard) - comparison - yes_no,
        "hotpotqa/yes/no": yes_no}
    assert sum(got["queries_by_question_type"].values()) == len(built.queries)
