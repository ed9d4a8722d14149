"""The text stage: spoken-form text → chunks of token ids for the FlowLM.

``normalize`` (spoken forms) runs first; then ``TextPreparer`` cleans, chunks (≤ 50 tokens)
and tokenizes as upstream pocket-tts prepares its prompts.
"""

from .chunking import Chunker, TextChunk, ensure_terminal_punctuation
from .prepare import PreparedChunk, TextPreparer, TextStream, max_frames_for
from .streaming_chunker import StreamingChunker
from .tokenizer import Tokenizer

__all__ = [
    "Chunker",
    "PreparedChunk",
    "StreamingChunker",
    "TextChunk",
    "TextPreparer",
    "TextStream",
    "Tokenizer",
    "ensure_terminal_punctuation",
    "max_frames_for",
]
