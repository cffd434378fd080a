"""The retarget itself: binding a source rig to a target rig, the two methods (geometric frames and rest space) and their per-bone choice, pelvis and travel, bones in between, and planted feet."""
