from retrieval.core.candidates import Candidate, without


def cand(entry_id, score, similarity=None):
    return Candidate(entry_id, entry_id, "d", None, score, 0, "", similarity)


def test_without_drops_entries_cuts_to_depth_and_reborrows_similarities():
    vector = [cand("a", 0.9, 0.9), cand("b", 0.8, 0.8), cand("c", 0.7, 0.7), cand("d", 0.6, 0.6)]
    lexical = [cand("c", 9.0, 0.5), cand("a", 8.0), cand("e", 7.0, 0.4)]
    vec, lex = without([vector, lexical], {"a"}, 2)
    assert [c.entry_id for c in vec] == ["b", "c"]  # the next ones move up: the list is as long as before
    assert [c.entry_id for c in lex] == ["c", "e"]
    assert [c.similarity for c in lex] == [0.7, None]  # from the vector list as cut, as the lookup borrows them
    assert without([vector], (), 10) == (tuple(vector),)
