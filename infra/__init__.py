"""CDK infrastructure of the VoiceIDE conductor: one stack per stage, configured in cdk.json."""
