"""Pictures of observations (evaluate's GIF, the preview) for every layout an environment spec declares."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import envs
from podracer.core.types import EnvSpec
from podracer.run.play import picture
from podracer.run.evaluate import write_gif
from podracer.core.types import ImageLayout


def _first_observation(name):
    env = envs.make(name)
    _, timestep = jax.jit(env.reset)(jax.random.key(0))
    return env.spec(), np.asarray(timestep.observation)


def _colours(image):
    return {tuple(c) for c in image.reshape(-1, 3)}


@pytest.mark.suite("gymnax")
def test_minatar_boards_are_colour_coded_grids_of_the_boards_size(tmp_path):
    from PIL import Image

    spec, observation = _first_observation("gymnax:Breakout-MinAtar")  # [10, 10, 4] channels last, 0/1 planes
    image = picture(observation, spec)
    assert image.shape == (10, 10, 3) and image.dtype == np.uint8
    occupied = observation.any(axis=-1)
    assert (image[occupied] > 0).any(axis=-1).all() and not image[~occupied].any()  # empty cells black, others not
    top = 3 - np.argmax(observation[..., ::-1] > 0, axis=-1)  # a cell's colour is that of its last plane on
    assert len(_colours(image[occupied])) == len(set(top[occupied].tolist()))
    write_gif([image, 255 - image], str(tmp_path / "minatar.gif"))
    with Image.open(tmp_path / "minatar.gif") as gif:
        assert gif.size == (160, 160) and gif.n_frames == 2
        assert np.asarray(gif.convert("RGB")).max() > 100  # not black


def test_catch_boards_and_atari_frame_stacks_are_grey():
    spec, observation = _first_observation("catch")  # [10, 5] board of 0/1
    image = picture(observation, spec)
    assert image.shape == (10, 5) and image.dtype == np.uint8
    np.testing.assert_array_equal(image, 255 * (observation > 0))
    frames = np.random.default_rng(0).integers(0, 256, (4, 84, 84), dtype=np.uint8)  # envpool's channels-first stack
    atari = EnvSpec(jax.ShapeDtypeStruct((4, 84, 84), jnp.uint8), num_actions=6)
    np.testing.assert_array_equal(picture(frames, atari), frames[-1])  # the newest frame, as it is


def test_rgb_images_keep_their_colours_and_many_plane_boards_get_a_colour_per_plane():
    rgb = np.zeros((6, 8, 3), np.float32)
    rgb[..., 0], rgb[2, 3] = 1.0, (0.0, 0.5, 1.0)
    spec = EnvSpec(jax.ShapeDtypeStruct((6, 8, 3), jnp.float32), num_actions=3, image=ImageLayout(-1, 0.0, 1.0))
    image = picture(rgb, spec)
    assert tuple(image[0, 0]) == (255, 0, 0) and tuple(image[2, 3]) == (0, 127, 255)
    # A pgx-like board: 2048's [4, 4, 31] one-hot exponents (plane 0: an empty cell).
    board = np.zeros((4, 4, 31), np.float32)
    exponents = np.arange(16).reshape(4, 4) % 5
    board[np.arange(4)[:, None], np.arange(4)[None, :], exponents] = 1.0
    spec = EnvSpec(jax.ShapeDtypeStruct((4, 4, 31), jnp.float32), num_actions=4, image=ImageLayout(-1, 0.0, 1.0))
    image = picture(board, spec)
    assert image.shape == (4, 4, 3) and (image.reshape(16, 3).max(axis=1) > 0).all()
    assert len(_colours(image)) == 5  # one colour per exponent
    for e in range(5):
        assert len(_colours(image[exponents == e])) == 1


@pytest.mark.suite("xminigrid")
def test_xminigrid_views_are_colour_coded():
    spec, observation = _first_observation("xminigrid:MiniGrid-Empty-5x5")
    image = picture(observation, spec)
    assert image.shape == (*observation.shape[:2], 3)
    assert len(_colours(image)) >= 2 and image.max() > 100  # walls, floor, the goal: not one flat colour
    board = np.zeros((3, 3, 2), np.float32)  # planes that hold values (ids), not on/off: a colour per combination
    board[0, 0], board[1, 1], board[2, 2] = (2, 5), (2, 5), (7, 1)
    ids = EnvSpec(jax.ShapeDtypeStruct((3, 3, 2), jnp.float32), num_actions=3, image=ImageLayout(-1, 0.0, 10.0))
    image = picture(board, ids)
    assert (image[0, 0] == image[1, 1]).all() and not image[0, 1].any() and image[0, 0].any() and image[2, 2].any()


@pytest.mark.suite("pgx")
def test_pgx_boards_are_colour_coded_grids_of_the_boards_size():
    spec, observation = _first_observation("pgx:2048")  # [4, 4, 31] one-hot exponents, two tiles at the start
    image = picture(observation, spec)
    assert image.shape == (4, 4, 3) and image.dtype == np.uint8
    tiles = observation[..., 1:].any(axis=-1)  # plane 0 is an empty cell
    assert tiles.sum() == 2 and (image[tiles] > 0).any(axis=-1).all()
    assert len(_colours(image)) >= 2  # tiles apart from the empty cells


@pytest.mark.suite("navix")
def test_navix_views_are_colour_coded():
    spec, observation = _first_observation("navix:Empty-5x5")
    image = picture(observation, spec)
    assert image.shape == (5, 5, 3) and len(_colours(image)) >= 2 and image.max() > 100
