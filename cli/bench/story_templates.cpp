#include "cli/bench/story_templates.hpp"

#include <algorithm>
#include <random>

#include "common/error.hpp"

namespace kvg::cli {

namespace {

const std::vector<std::string> kNames = {"Zoe", "Tom", "Lily", "Ben", "Sue", "Max", "Anna", "Tim", "Mia", "Sam",
                                         "Lucy", "Jack", "Emma", "Leo", "Kate", "Dan", "Rose", "Finn", "Amy", "Bob",
                                         "Ella", "Joe", "Lola", "Ned"};
const std::vector<std::string> kColours = {"red", "blue", "green", "pink", "yellow", "purple", "white", "brown"};
const std::vector<std::string> kThings = {"ball", "kite", "hat", "boat", "car", "dress", "box", "cup", "bike", "book"};
const std::vector<std::string> kPlaces = {"park", "beach", "lake", "garden", "school", "farm", "shop", "forest"};

}  // namespace

size_t story_name_count() { return kNames.size(); }

std::vector<TemplateStory> template_stories(size_t n, uint64_t seed) {
  if (n > kNames.size())
    throw Error(ErrorCode::InvalidArgument, "at most " + std::to_string(kNames.size()) + " distinct stories");
  std::mt19937_64 rng(seed);
  std::vector<std::string> names = kNames;
  std::shuffle(names.begin(), names.end(), rng);
  auto pick = [&rng](const std::vector<std::string>& from) { return from[size_t(rng() % from.size())]; };
  std::vector<TemplateStory> out;
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = names[i];
    const std::string colour = pick(kColours), thing = pick(kThings), place = pick(kPlaces);
    TemplateStory s;
    s.name = name;
    s.text = "Once upon a time, there was a child named " + name + ". " + name + " had a " + colour + " " + thing +
             ". " + name + " took the " + colour + " " + thing + " to the " + place + ".";
    s.question = name + " had a";
    s.answer = colour;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kvg::cli
