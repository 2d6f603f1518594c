"""What is spoken and heard: the speakers (text-to-speech), the heard part of an answer, the
recognizer's partial and final transcripts."""
