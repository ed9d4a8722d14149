"""About 200 random barge-ins over 4 client services of one real server (issue 32): replies through
pipelines whose output plays in real time (``benchmarks.soak.service``), every one barged in
at a random moment. Asserts correctness only: no stale audio, clean pairing, no mute reply."""

from __future__ import annotations

from server_process import ServerProcess

from benchmarks.soak import service as soak


async def test_200_barge_ins_over_4_client_services(server: ServerProcess) -> None:
    outcomes, samples = await soak.soak(
        server.pack_dir,
        services=4,
        replies=58,
        modes="mixed",
        barge_in=1.0,
        silent=0.0,
        seed=11,
        server_url=server.ws_url,
    )
    figures = soak.figures(outcomes)
    print(soak.report(outcomes, samples, 0.0))
    assert figures.replies == 232
    assert figures.interrupted >= 150  # a barge-in after a reply ended is not one
    assert figures.stale_frames == 0
    assert figures.orphan_audio_frames == 0
    assert figures.unpaired == 0
    assert figures.mute == 0
    assert figures.errors == ()
    assert server.metric("pocket_tts_streams") <= 4  # one main session per service at most
