"""Multi-Source Reasoning validity: the evidence-chain rule on the issue's own examples, the
checker on tampered pool sets, and an independent re-check of the default sample build that
answers each question from a Hard variant with the sample's own templates (no shared code)."""
import json
import re
from collections import Counter

import pytest

from mmbench.builders.parts.evidence_chain import ChainUnit, chain_survives
from mmbench.builders.parts.expansion import boundary_matched_text
from mmbench.builders.multi_source_reasoning import TASK_VERSION, build
from mmbench.builders.sources import sample_reasoning as sr
from mmbench.tasks.validation import validate
from mmbench.data.documents import Image, Text
from mmbench.data.poolset import load_poolset
from mmbench.data.tokens import UnifiedTokenCounter


@pytest.fixture(scope="module")
def default_ps(tmp_path_factory):
    """The default sample build (what `mmbench build --task multi_source_reasoning` makes)."""
    out = tmp_path_factory.mktemp("msr-default") / "msr"
    build("sample", out, seed=0, progress=False)
    return load_poolset(out, verify=True)


# ---- the rule, on the examples of issue 13 -------------------------------------------------

def _u(text, subject="", gold=False, ref=None):
    return ChainUnit(text, ref, subject, gold)


ROSA = [_u("Silverline Optics", "Silverline Optics"),
        _u("Silverline Optics was founded in 1961 by Rosa Gallowglass.", "Silverline Optics", True),
        _u("Rosa Gallowglass", "Rosa Gallowglass"),
        _u("Rosa Gallowglass (born 1970) is a diplomat who grew up in Westermoor.", "Rosa Gallowglass", True),
        _u("Rosa was born in Westermoor in 1970.", "Rosa Gallowglass", True),
        _u("Critics have praised Gallowglass's early work for its patience.", "Rosa Gallowglass")]
Q_ROSA = "In which year was the founder of Silverline Optics born?"


def _swap(units, removed, text="Unrelated words about a river fair."):
    return [_u(text) if k in removed else u for k, u in enumerate(units)]


def test_rule_catches_a_restated_birth_fact_and_a_surviving_answer():
    why = chain_survives(ROSA, _swap(ROSA, [4]), [4], Q_ROSA, "1970")
    assert any(w.startswith("answer survives") for w in why) and any(w.startswith("fact restated") for w in why)
    assert chain_survives(ROSA, _swap(ROSA, [3, 4]), [3, 4], Q_ROSA, "1970") == []   # both gone: broken


def test_rule_accepts_a_removed_bridge_and_catches_its_restatement():
    assert chain_survives(ROSA, _swap(ROSA, [1]), [1], Q_ROSA, "1970") == []
    restated = ROSA + [_u("In 1961 Rosa Gallowglass founded Silverline Optics.", "")]
    why = chain_survives(restated, _swap(restated, [1]), [1], Q_ROSA, "1970")
    assert why and why[0].startswith("fact restated")


def test_rule_catches_a_surviving_gold_image_and_an_unneeded_span():
    units = [_u("Harrowgate Textiles annual report 2021: letter to shareholders.", gold=True),
             _u(None, gold=True, ref="aa/chart.jpg"),
             _u("Our chief executive officer, Ines Northcott, joined the board.", gold=True)]
    q = "How much revenue did Harrowgate Textiles report in 2020 according to its revenue chart, and who is its CEO?"
    a = "504 million dollars; Ines Northcott"
    assert chain_survives(units, _swap(units, [0]), [0], q, a) == [
        "span not needed: it carries no part of the answer and no link to the other evidence, which still answers"]
    assert chain_survives(units, _swap(units, [2]), [2], q, a) == []
    img_gone = [units[0], _u(None, ref="bb/other.jpg"), units[2]]
    assert chain_survives(units, img_gone, [1], q, a) == []
    img_kept = units + [_u(None, ref="aa/chart.jpg")]          # the same picture elsewhere in the candidate
    why = chain_survives(img_kept, [units[0], _u(None, ref="bb/other.jpg"), units[2], img_kept[3]], [1], q, a)
    assert any(w.startswith("image survives") for w in why)


def test_free_form_answers_written_nowhere_are_not_searched():
    units = [_u("Revenue rose in every region except the north.", gold=True),
             _u(None, gold=True, ref="aa/chart.jpg"),
             _u("The board approved a new plant.", gold=True)]
    q = "Why did the company build a new plant according to its chart?"
    a = "Because demand in the southern and eastern regions grew faster than capacity over five years"
    assert chain_survives(units, _swap(units, [2]), [2], q, a) == []      # each span counts as needed


def test_rule_catches_the_answer_in_the_replacement_and_ignores_answers_in_the_question():
    why = chain_survives(ROSA, _swap(ROSA, [3, 4], "Rosa Gallowglass, born 1970, founded a firm."), [3, 4], Q_ROSA,
                         "1970")
    assert why and why[0].startswith("answer survives")
    coincidence = _swap(ROSA, [3, 4], "A plaque from 1970 marks the square.")   # written, but tied to nothing
    assert chain_survives(ROSA, coincidence, [3, 4], Q_ROSA, "1970") == []
    titled = [*ROSA[:2],
              _u("Silverline Optics is a privately held firm.", "Silverline Optics")]
    why = chain_survives(titled, _swap(titled, [1]), [1], "Which company was founded by Rosa Gallowglass?",
                         "Silverline Optics")
    assert why == []          # the answer's own title and paragraph do not say who founded it
    units = [_u("Northwind Tidal Power was founded in 1956 by Zora Pennywhistle.", "Northwind Tidal Power", True),
             _u("Northwind Tidal Power is a privately held firm.", "Northwind Tidal Power"),
             _u("Brackwater Textiles was founded in 2009 by Greta Thistlewood.", "Brackwater Textiles", True)]
    q = "Which was founded earlier, Northwind Tidal Power or Brackwater Textiles?"
    assert chain_survives(units, _swap(units, [0]), [0], q, "Northwind Tidal Power") == []


def test_values_and_a_yes_no_comparison_in_hotpotqa_style():
    from mmbench.builders.parts.evidence_chain import values

    assert values("During 1931 Ada Lockhart met Blue Shore's editor.", set()) == {"1931", "ada", "lockhart", "blue",
                                                                                   "shore"}
    assert values("Ada Lockhart met Ada.", {"lockhart"}) == {"ada"}      # a first word capitalised again later
    assert values("Its best-known faculty is the school of History.", set()) == {"history"}
    units = [_u(" Scott Derrickson is an American director.", "Scott Derrickson", True),
             _u(" He lives in Los Angeles.", "Scott Derrickson"),
             _u(" Edward Davis Wood Jr. was an American filmmaker.", "Ed Wood", True),
             _u(" Ed Wood is a 1994 biopic starring an American actor.", "Ed Wood (film)")]
    q = "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert chain_survives(units, _swap(units, [0]), [0], q, "yes") == []     # yes/no: every span needed
    restated = units + [_u(" Derrickson, an American, directs horror films.", "Scott Derrickson")]
    assert chain_survives(restated, _swap(restated, [0]), [0], q, "yes")[0].startswith("fact restated")


def test_checker_reproduces_the_old_failures_on_a_tampered_build(default_ps):
    """Put a replaced sentence back (what the 1.0 builder left) and duplicate a question: the
    checker names the item and the invariant."""
    ps = default_ps
    cands = ps.candidate_by_id()
    victim = next(c for c in ps.candidates if c.meta["difficulty"] == "hard" and c.meta["provenance"]["also_replaced"])
    easy = cands[victim.meta["provenance"]["counterpart"]]
    k = victim.meta["provenance"]["also_replaced"][0]["segment_index"]
    replacement = victim.segments[k]
    victim.segments[k] = easy.segments[k]          # the restating sentence survives, as in 1.0
    q0 = next(q for q in ps.queries if q.meta["dataset"] == "hotpotqa")
    pool = next(p for p in ps.pools if p.query_id == q0.id and p.meta["difficulty"] == "easy")
    other = next(cands[c].meta["record_id"] for c in pool.candidate_ids if c not in pool.relevant_ids)
    q1 = next(q for q in ps.queries if q.meta["dataset"] == "hotpotqa" and q.meta["record_id"] == other)
    old = q1.segments
    q1.segments = list(q0.segments)
    try:
        report = validate(ps)
    finally:
        victim.segments[k] = replacement
        q1.segments = old
    lines = [v.line() for v in report.violations]
    assert any(line.startswith(f"{victim.id}: hard_chain_broken: ") for line in lines), lines
    assert any("only_labelled_answers" in line and "asks the same question" in line for line in lines)
    assert validate(ps).ok


def test_checker_flags_broken_length_and_cpq_promises(default_ps):
    ps = default_ps
    item = ps.pools[0]
    c = ps.candidate_by_id()[item.candidate_ids[1]]
    tokens, ids = c.tokens, list(item.candidate_ids)
    c.tokens = tokens + 500
    item.candidate_ids = ids[:-1]
    try:
        counts = validate(ps).counts()
    finally:
        c.tokens, item.candidate_ids = tokens, ids
    assert counts["length_promises"] >= 1 and counts["candidates_per_query"] == 1


# ---- the default sample build ---------------------------------------------------------------

def test_validity_report_and_drop_counts_in_the_manifest(default_ps):
    m = default_ps.manifest
    assert default_ps.task_version == TASK_VERSION == "1.5"
    v = m["validity"]
    assert v["ok"] and v["violations"] == 0
    assert {"hard_chain_broken", "only_labelled_answers", "length_promises", "candidates_per_query",
            "replacement_boundary", "distinct_questions", "label_blind", "label_is_own_record", "distinct_content",
            "pool_order_blind", "pool_centre_free", "shortcut_probe", "lexical_baseline"} == set(v["invariants"])
    assert v["leak_audit"]["leaks"] == [] and "Binomial" in v["leak_audit"]["rule"]
    assert v["checked"]["hard_chain_broken"] == sum(c.meta["difficulty"] == "hard" for c in default_ps.candidates)
    assert v["checked"]["replacement_boundary"] > 100
    hv = m["dropped"]["hard_variants"]
    assert hv["read"] == hv["kept"] + sum(d["count"] for d in hv["dropped"].values())
    assert hv["kept"] == v["checked"]["hard_chain_broken"]
    assert any(r.startswith("span not needed") for r in hv["dropped"])
    rec = m["dropped"]["records"]
    assert rec["kept"] == 24 and rec["read"] == rec["kept"] + sum(d["count"] for d in rec["dropped"].values())


FOUNDER = re.compile(r"In which year was the founder of (.+) born\?")
INSTITUTE = re.compile(r"Which river flows through the city where the (.+) is located\?")
SINGER = re.compile(r"Which river runs through the birthplace of the lead singer of (.+)\?")
EARLIER = re.compile(r"Which was founded earlier, (.+) or (.+)\?")
REVENUE = re.compile(r"How much revenue did (.+) report in (\d{4}) according")


def _answerable(question: str, answer: str, texts: list[str], images: set[str], gold_images: set[str]) -> bool:
    """Answer the sample's question from a candidate's texts, following its templates literally."""
    blob = "\n".join(texts)
    if m := FOUNDER.match(question):
        f = re.search(rf"{re.escape(m[1])} was founded in \d{{4}} by (\w+) (\w+)\.", blob)
        return bool(f) and bool(re.search(rf"({f[1]}|{f[2]})\b[^\n]*\b{answer}\b", blob))
    if m := INSTITUTE.match(question):
        city = re.search(rf"The {re.escape(m[1])} is a public research university located in (.+?)\.", blob)
        return bool(city) and f"The River {answer} flows through {city[1]} " in blob
    if m := SINGER.match(question):
        singers = re.findall(r"The band's lead singer is (\w+) (\w+)\.", blob)   # replacements may add one
        for first, last in singers:
            for city in re.findall(rf"(?:{first} was born in|{first} {last} \(born \d+\) is an? \w+ who grew up in) "
                                   r"(.+?)(?: in \d{4})?\.", blob):
                if f"The River {answer} flows through {city} " in blob:
                    return True
        return False
    if m := EARLIER.match(question):
        return all(re.search(rf"{re.escape(name)} was founded in \d{{4}}", blob) for name in (m[1], m[2]))
    if REVENUE.match(question):
        ceo = answer.split("; ")[1]
        return bool(gold_images & images) and f"Our chief executive officer, {ceo}," in blob
    raise AssertionError(f"the re-check does not know the question {question!r}")


def test_independent_recheck_no_hard_variant_answers_and_no_question_repeats(default_ps):
    ps = default_ps
    cands = ps.candidate_by_id()
    queries = {(q.meta["dataset"], q.meta["record_id"]): q for q in ps.queries}
    seen = Counter()
    for c in ps.candidates:
        q = queries[(c.meta["dataset"], c.meta["record_id"])]
        easy = cands[c.meta["provenance"].get("counterpart", c.id)]
        gold = {easy.segments[e["segment_index"]].ref for e in easy.meta["provenance"]["evidence"]
                if isinstance(easy.segments[e["segment_index"]], Image)}
        texts = [s.text for s in c.segments if isinstance(s, Text)]
        images = {s.ref for s in c.segments if isinstance(s, Image)}
        ok = _answerable(q.segments[0].text, q.meta["answer"], texts, images, gold)
        assert ok == (c.meta["difficulty"] == "easy"), (c.id, q.segments[0].text)
        seen[c.meta["difficulty"]] += 1
    assert seen["hard"] >= 140 and seen["easy"] == 72
    for ds in ("hotpotqa", "mmdocrag"):
        asked = [" ".join(q.segments[0].text.lower().split()) for q in ps.queries if q.meta["dataset"] == ds]
        assert len(asked) == len(set(asked)) == 12


def test_sample_generator_never_repeats_a_question():
    for seed in (0, 1, 2):
        qs = [r["question"] for r in sr.hotpot_records(seed, 60)]
        assert len(qs) == len(set(qs))


def test_no_article_slips_in_the_sample():
    recs = sr.hotpot_records(0, 30)
    text = " ".join(s for r in recs for _, sents in r["context"] for s in sents)
    text += " ".join(q["text"] for r in sr.mmdocrag_records(0, 12)[0] for q in r["text_quotes"])
    assert not re.search(r"\ba [aeiou]", text)


# ---- replacement texts ------------------------------------------------------------------------

def test_replacements_are_whole_sentences_or_whole_words_of_their_donor(default_ps):
    ps = default_ps
    donor = {}
    for c in ps.candidates:      # a unit the relevant candidate's decoy replaced is still in its Hard variants
        for seg, (role, source, _) in zip(c.segments, c.meta["provenance"]["units"]):
            if isinstance(seg, Text) and role != "replacement":
                donor[source] = seg.text
    n = Counter()
    for c in ps.candidates:
        prov = c.meta.get("provenance", {})
        decoy = prov.get("decoy", {})
        for r in [prov.get("replacement"), decoy.get("replacement")] + \
                [a["replacement"] for a in prov.get("also_replaced", []) + decoy.get("also_replaced", [])]:
            if not r or r["kind"] != "text":
                continue
            full = " ".join(" ".join(donor[u].split()) for u in r["from_units"])
            assert full.startswith(r["text"]), (c.id, r["text"])
            rest = full[len(r["text"]):]
            assert rest == "" or rest[0] == " ", (c.id, r["text"][-20:], rest[:10])   # never mid-word
            if r["boundary"] == "sentence":
                assert r["text"].rstrip()[-1] in ".!?"
            n[r["boundary"]] += 1
    assert n["sentence"] > n["word"] > 0     # most end a sentence


def test_boundary_matched_text_is_exact_and_never_cuts_a_word():
    tok = UnifiedTokenCounter.default().tokenizer
    sents = ["The town hosts a spring fair that draws traders from the surrounding valleys.",
             "Visitors usually start at the Old Bridge, built in the fourteenth century.",
             "Its library holds a large collection of maps and early printed books."]
    whole = len(tok.encode(" ".join(sents[:2])))
    assert boundary_matched_text(tok, sents, whole) == (" ".join(sents[:2]), "sentence")
    for n in range(5, whole):
        fit = boundary_matched_text(tok, sents, n)
        if fit is None:
            continue
        text, kind = fit
        assert len(tok.encode(text)) == n
        assert " ".join(sents).startswith(text) and " ".join(sents)[len(text)] == " "
    assert boundary_matched_text(tok, sents[:1], 500) is None


# ---- the optional LLM check of Hard variants (loopback fake server) -------------------------

class _Judge:
    """A loopback chat server: the query auditor keeps everything; the Hard-variant auditor says a
    variant still answers when the record's answer is still written in it (a stand-in for a model)."""

    def __init__(self, reply=None):
        from loopback_server import LoopbackServer

        judge = self

        class Server(LoopbackServer):
            def handle(self, path, headers, body):
                judge.requests.append(body)
                system, user = body["messages"][0]["content"], body["messages"][1]["content"]
                if "{\"answerable\"" not in system:
                    content = json.dumps({"keep": True, "reason": "linked"})
                else:
                    answer = judge.answers[user.split("\n", 1)[0][len("Question: "):]]
                    still = answer.split(";")[0] in user.split("Document:", 1)[1]
                    content = judge.reply or json.dumps({"answerable": still, "reason": "answer written" if still
                                                         else "a needed fact is gone"})
                return 200, {"Content-Type": "application/json"}, {
                    "choices": [{"message": {"role": "assistant", "content": content}}]}

        self.reply, self.requests, self.answers = reply, [], {}
        self.server = Server()
        self.url = self.server.url + "/v1"


KW = dict(lengths=(2048,), datasets=("hotpotqa",), queries_per_dataset=5, candidates_per_query=4, progress=False)


def test_hard_auditor_drops_the_variants_it_judges_answerable(tmp_path):
    judge = _Judge()
    judge.answers = {r["question"]: r["answer"] for r in sr.hotpot_records(0, 40)}
    try:
        ps = build("sample", tmp_path / "a", auditor_model="judge-1", auditor_base_url=judge.url, audit_hard=True,
                   **KW)
    finally:
        judge.server.close()
    hard_calls = [b for b in judge.requests if "{\"answerable\"" in b["messages"][0]["content"]]
    assert hard_calls and all(b["model"] == "judge-1" and b["temperature"] == 0 for b in hard_calls)
    assert "Document:" in hard_calls[0]["messages"][1]["content"]
    assert ps.builder["query_filter"]["hard_auditor"]["prompt_version"] == "hard-variant-auditor/1"
    dropped = ps.manifest["dropped"]["hard_variants"]["dropped"]
    # a removed bridge leaves the founder's birth year written: the fake judge calls it answerable
    assert dropped["auditor: still answers"]["count"] >= 1
    audited = [c.meta["provenance"]["hard_audit"] for c in ps.candidates if c.meta["difficulty"] == "hard"]
    assert audited and all(a == {"answerable": False, "reason": "a needed fact is gone"} for a in audited)
    # no variant the judge called answerable is in the pool set (a Hard pool of 4 has room for one variant per
    # family, issue 43: a dropped one may leave its place to another variant, so counts do not simply subtract)
    kept = {(c.meta["record_id"], c.meta["provenance"]["which"]) for c in ps.candidates
            if c.meta["difficulty"] == "hard"}
    for example in dropped["auditor: still answers"]["examples"]:
        record, which = example.split("@")[0].split("/")
        assert (record, which) not in kept, example
    plain = build("sample", tmp_path / "b", **KW)
    n_hard = lambda p: sum(c.meta["difficulty"] == "hard" for c in p.candidates)
    assert 0 < n_hard(ps) <= n_hard(plain)


def test_hard_auditor_unreadable_reply_drops_the_variant_and_says_so(tmp_path):
    judge = _Judge(reply="probably fine")
    judge.answers = {r["question"]: r["answer"] for r in sr.hotpot_records(0, 40)}
    try:
        with pytest.raises(ValueError, match=r"not enough Hard variants .*dropped so far: auditor failed ×"):
            build("sample", tmp_path / "a", auditor_model="judge-1", auditor_base_url=judge.url, audit_hard=True,
                  **KW)
    finally:
        judge.server.close()


def test_audit_hard_without_an_auditor_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="audit_hard=true needs auditor_model and auditor_base_url"):
        build("sample", tmp_path / "a", audit_hard="true", **KW)       # as `--param audit_hard=true` gives it
    with pytest.raises(ValueError, match="audit_hard must be true or false, not 'yes'"):
        build("sample", tmp_path / "b", audit_hard="yes", **KW)
    assert build("sample", tmp_path / "c", audit_hard="false", **KW).builder["query_filter"]["hard_auditor"] is None


def test_a_record_whose_answer_is_everywhere_gets_no_hard_variant_and_is_dropped(tmp_path):
    from mmbench.builders.parts.hard_variants import plan_variants
    from mmbench.builders.sources.hotpotqa import hotpot_record

    rec = {"_id": "everywhere", "question": "Which river flows through Pellingford?", "answer": "Mirrow",
           "supporting_facts": [["Pellingford", 0], ["Pellingford", 1]],
           "context": [["Pellingford", ["The River Mirrow flows through Pellingford.",
                                        "Pellingford lies on the Mirrow, which floods in spring."] +
                         [f"The Mirrow at Pellingford has weir number {k}." for k in range(4)]],
                       ["Mirrow", ["The Mirrow is a river."]]]}
    r = hotpot_record(rec, UnifiedTokenCounter.default())
    plans, dropped = plan_variants(r, 0)
    assert plans == {} and set(dropped.values()) == {"answer survives elsewhere"}
    fine = sr.hotpot_records(0, 12)
    hp = tmp_path / "hotpot.json"
    hp.write_text(json.dumps([rec] + fine))
    ps = build("real", tmp_path / "out", hotpotqa=str(hp), datasets=("hotpotqa",), **{
        k: v for k, v in KW.items() if k != "datasets"})
    why = [d["reason"] for d in ps.builder["query_filter"]["decisions"] if d["query_id"] == "everywhere"]
    assert why == ["no Hard variant breaks its evidence chain (answer survives elsewhere)"]
    assert "everywhere" not in {q.meta["record_id"] for q in ps.queries}


def test_records_another_record_would_answer_are_dropped_before_pooling(tmp_path):
    recs = sr.hotpot_records(0, 12)
    twin = json.loads(json.dumps(recs[0]))                 # same question, another answer
    twin.update({"_id": "twin", "answer": "1111"})
    sharer = json.loads(json.dumps(recs[1]))               # another question over the same paragraphs
    sharer.update({"_id": "sharer", "question": recs[1]["question"].replace("Which river", "What river")})
    hp = tmp_path / "hotpot.json"
    hp.write_text(json.dumps(recs + [twin, sharer]))
    ps = build("real", tmp_path / "out", hotpotqa=str(hp), datasets=("hotpotqa",), **{
        k: v for k, v in KW.items() if k != "datasets"})
    why = {d["query_id"]: d["reason"] for d in ps.builder["query_filter"]["decisions"]}
    assert why["twin"] == f"asks the same question as record {recs[0]['_id']!r}"
    assert why["sharer"] == f"another record holds all of its evidence ({recs[1]['_id']!r})"
    assert why[recs[1]["_id"]] == "another record holds all of its evidence ('sharer')"
    dropped = ps.manifest["dropped"]["records"]["dropped"]
    assert dropped["asks the same question as record '…'"]["count"] == 1
    assert dropped["another record holds all of its evidence ('…')"]["count"] == 2
    assert ps.manifest["validity"]["ok"]


# ---- Hard variants judged by what remains (issue 24): the needed fact in a sentence HotpotQA left unmarked ----

VALE = {"_id": "vale", "question": "Orrin Vale served as the secretary of the Harbour Lights Commission under which "
                                   "Governor of Westmarch?", "answer": "Edda Holloway",
        "supporting_facts": [["Orrin Vale", 0], ["Edda Holloway", 0]],   # only each paragraph's first sentence
        "context": [["Orrin Vale", ["Orrin Vale (1931–2009) was a newspaper reporter from Kettering Cross.",
                                    "He was the secretary of Governor Edda Holloway's Harbour Lights Commission "
                                    "from 1962 to 1966.",
                                    "In later life he taught at a small college near the coast."]],
                    ["Edda Holloway", ["Edda Holloway (1904–1990) was a lawyer and politician from Westmarch.",
                                       "She served as the ninth Governor of Westmarch from 1959 to 1967.",
                                       "Her papers are kept in the state archive at Dunmore."]],
                    ["Saltmarsh Ferry", ["The Saltmarsh Ferry crosses the estuary twice a day.",
                                         "It was first licensed in 1871."]]]}


def _unmarked_needed(r):
    """Indices of Vale's and Holloway's second sentences: unmarked, yet each ties the question to the answer."""
    return {i for i, u in enumerate(r.units) if not u.is_evidence and isinstance(u.segment, Text)
            and ("Harbour Lights Commission" in u.segment.text or "Governor of Westmarch" in u.segment.text)}


def test_a_hard_variant_keeping_an_unmarked_needed_fact_is_repaired_or_dropped():
    """Replacing only the marked first sentences leaves 'secretary of Governor Edda Holloway's Harbour Lights
    Commission' (and 'Governor of Westmarch' in Holloway's paragraph): still answered. Before issue 24 the plan
    replaced the marked sentence alone."""
    from mmbench.builders.parts.evidence_chain import chain_leaks
    from mmbench.builders.parts.hard_variants import _blanked, chain_units, plan_variants
    from mmbench.builders.sources.hotpotqa import hotpot_record

    r = hotpot_record(VALE, UnifiedTokenCounter.default())
    needed = _unmarked_needed(r)
    assert len(needed) == 2
    original = chain_units(r.units)
    for span in r.evidence_indices:   # the variant that replaces only a marked sentence still answers
        assert chain_leaks(original, _blanked(original, {span}), [span], r.question, r.answer)
    plans, dropped = plan_variants(r, 0)
    assert plans or dropped
    for which, removed in plans.items():
        assert needed <= set(removed), (which, removed)
        assert not chain_leaks(original, _blanked(original, set(removed)), removed, r.question, r.answer)


def test_msr_built_from_the_record_keeps_no_hard_variant_that_answers(tmp_path):
    hp = tmp_path / "hotpot.json"
    hp.write_text(json.dumps([VALE] + sr.hotpot_records(0, 12)))
    ps = build("real", tmp_path / "out", hotpotqa=str(hp), **{**KW, "queries_per_dataset": 13})
    why = {d["query_id"]: d["reason"] for d in ps.builder["query_filter"]["decisions"]}
    assert ps.manifest["validity"]["ok"]
    vale_hard = [c for c in ps.candidates if c.meta["record_id"] == "vale" and c.meta["difficulty"] == "hard"]
    assert "vale" in {q.meta["record_id"] for q in ps.queries} and vale_hard, why.get("vale")   # kept, repaired
    for c in ps.candidates:
        if c.meta["record_id"] == "vale" and c.meta["difficulty"] == "hard":
            text = " ".join(s.text for s in c.segments if isinstance(s, Text))
            assert "Harbour Lights Commission" not in text and "Governor of Westmarch" not in text, c.id


def test_mmdocrag_layout_sample_records_are_distinct_reports_with_evidence_anywhere():
    """Before issue 24, sample-md-003 and sample-md-013 were one company's report (each answering the other's
    question), and every record's evidence sat on its first pages (the first 3.4 % of a candidate)."""
    recs, _ = sr.mmdocrag_records(0, 17)   # the default sample's count (12 queries, the filter's margin)
    strong = [r for r in recs if r["question"] != "What does this say?"]
    assert len({r["doc_name"] for r in recs}) == len(recs)
    assert len({r["answer_short"].split("; ")[1] for r in strong}) == len(strong)   # distinct chief executives
    where = []
    for r in strong:
        quotes = sorted(r["text_quotes"] + r["img_quotes"], key=lambda q: (q["page_id"], q["layout_id"]))
        order = [q["quote_id"] for q in quotes]
        where += [order.index(g) / (len(order) - 1) for g in r["gold_quotes"] if g != "text1"]
    assert max(where) > 0.6 and sum(w > 0.3 for w in where) >= len(where) / 3, sorted(where)
