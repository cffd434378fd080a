"""The rig model: skeletons and forward kinematics, clips, bone frames, the one rotation convention, and the built-in sample humanoid."""
